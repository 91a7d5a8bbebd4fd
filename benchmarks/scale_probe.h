// What idem-scale's modes (idem_scale.cc) share: filling a store with
// completed records, timing claims on it, and reading the process's memory.
// Every failure ends the process with a message (Die): a measurement with
// a failed step is no measurement. Single-threaded except Fill.

#ifndef IDEM_BENCHMARKS_SCALE_PROBE_H_
#define IDEM_BENCHMARKS_SCALE_PROBE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "idem/store.h"

namespace idem::scale {

using Clock = std::chrono::steady_clock;

// A field of /proc/self/status in bytes (VmHWM, VmRSS), 0 when absent.
std::size_t ProcStatusBytes(std::string_view field);

// Prints "idem-scale: `what`" and exits with status 1.
[[noreturn]] void Die(const std::string& what);

// Claims and completes ids [from, to) (bench::IdFor) with their own bodies
// (`body` > 0 bytes each) or one shared response (`body` == 0: the latency
// runs, where only the index matters), on `threads` threads.
void Fill(Store& store, std::uint64_t from, std::uint64_t to, std::size_t body,
          int threads);

// What one Clock::now() costs, in nanoseconds (included in every probe).
double ClockCostNs();

// The store `uri` names (OpenStore), or Die.
std::unique_ptr<Store> Open(const std::string& uri);

// Probes a store that holds `held` records, `probes` claims each: new ids
// from `*next_new` on (advanced), replays over all records, and replays over
// `small` of them, so that the working set, and with it the cache misses,
// is the same whatever the table's size. Prints one `latency` line each.
void ProbeBoth(Store& store, const std::string& name, const std::string& config,
               std::size_t held, std::size_t small, std::size_t probes,
               std::uint64_t* next_new);

}  // namespace idem::scale

#endif  // IDEM_BENCHMARKS_SCALE_PROBE_H_
