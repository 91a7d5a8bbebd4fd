// The state of one benchmark run of idem-bench: the fresh store (or raw
// engine) that thread 0 opens before the timed loop and closes and removes
// after it (run_store.h derives its place from the spec's URI).
//
// Thread-safety: OpenRun and CloseRun act on thread 0 only (a no-op on the
// others); the other threads read the run with CurrentRun inside the loop,
// whose start is the barrier after thread 0's set-up. One run at a time.

#ifndef IDEM_BENCHMARKS_RUN_STATE_H_
#define IDEM_BENCHMARKS_RUN_STATE_H_

#include <cstddef>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "idem/store.h"
#include "raw_ops.h"
#include "workloads.h"

namespace idem::bench {

struct Run {
  std::string uri;  // What RemoveRunStore cleans up; "" when nothing.
  std::unique_ptr<Store> store;
  std::unique_ptr<RawOp> raw;
};

// Thread 0, before the loop: a fresh store for `records` records at most
// (the ShardedMutexStore for the baseline's spec), or with `raw` the
// engine's raw write; the run, or null on the other threads and when it
// cannot be opened (the run is then skipped with the error, which the spec
// keeps so that its later runs skip at once).
Run* OpenRun(benchmark::State& state, StoreSpec& spec, std::size_t records,
             bool raw);

// Thread 0, after the loop: closes the run's store and removes it.
void CloseRun(benchmark::State& state);

// The run, read inside the loop; null, and this thread's run skipped, when
// the set-up failed.
Run* CurrentRun(benchmark::State& state);

// Whether `uri` names a server (PostgreSQL, Redis, Redis Cluster): a store
// whose pool connects lazily, warmed up before timing, and that has nothing
// to remove when it could not be opened.
bool IsServer(const std::string& uri);

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_RUN_STATE_H_
