// Allocations per operation, for the allocs_per_op and alloc_bytes_per_op
// counters of the store workloads: on the in-memory stores allocation is
// most of the cost, so the count explains the times. alloc_counter.cc
// replaces the global operator new of the program that links it.
//
// Thread-safety: the counts are per thread (no contention); a counter is
// created and reported on the thread whose allocations it counts.

#ifndef IDEM_BENCHMARKS_ALLOC_COUNTER_H_
#define IDEM_BENCHMARKS_ALLOC_COUNTER_H_

#include <cstdint>

#include <benchmark/benchmark.h>

namespace idem::bench {

// This thread's operator new calls and bytes since it started.
std::uint64_t ThreadAllocations();
std::uint64_t ThreadAllocatedBytes();

// Counts this thread's allocations from its creation to Report, which adds
// them per iteration of the run (summed over the run's threads).
class AllocationCounter {
 public:
  void Report(benchmark::State& state) const {
    using benchmark::Counter;
    state.counters["allocs_per_op"] =
        Counter(static_cast<double>(ThreadAllocations() - allocations_),
                Counter::kAvgIterations);
    state.counters["alloc_bytes_per_op"] =
        Counter(static_cast<double>(ThreadAllocatedBytes() - bytes_),
                Counter::kAvgIterations);
  }

 private:
  std::uint64_t allocations_ = ThreadAllocations();
  std::uint64_t bytes_ = ThreadAllocatedBytes();
};

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_ALLOC_COUNTER_H_
