// The benchmarks of idem-bench, registered with Google Benchmark under the
// names idem_bench.cc's header lists, for the store URIs of a run.
//
// Thread-safety: call once, before benchmark::RunSpecifiedBenchmarks.

#ifndef IDEM_BENCHMARKS_REGISTRATION_H_
#define IDEM_BENCHMARKS_REGISTRATION_H_

#include <string>
#include <string_view>
#include <vector>

#include "workloads.h"

namespace idem::bench {

// The URIs of a comma-separated list (empty items dropped). A
// redis-cluster URI's host list has commas too: an item that does not start
// with a store scheme of this build ("memory:", "redis:", ...) continues the
// URI before it.
std::vector<std::string> SplitUriList(std::string_view list);

// One spec per URI, labelled with its scheme, numbered (<scheme>_<k>, in
// list order) when several URIs share a scheme.
std::vector<StoreSpec> MakeSpecs(const std::vector<std::string>& uris);

// Registers every workload for `specs`, the baseline rows for `sharded`
// (the ShardedMutexStore, uri ""), and the hashing rows. The benchmarks
// point at the specs: they must outlive the run.
void RegisterAll(std::vector<StoreSpec>& specs, StoreSpec& sharded);

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_REGISTRATION_H_
