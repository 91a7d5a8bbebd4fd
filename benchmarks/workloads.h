// The workloads of idem-bench, one Google Benchmark function each; what
// they do, their names and counters are listed in idem_bench.cc's header,
// which registration.cc follows.
//
// Every run (every thread count, and every trial run Google Benchmark makes
// to size a run) gets a fresh store (run_store.h): thread 0 opens it before
// the timed loop and closes and removes it after.
//
// Thread-safety: one run at a time (Google Benchmark's order); the run's
// state is published to the other threads by the loop's start barrier.

#ifndef IDEM_BENCHMARKS_WORKLOADS_H_
#define IDEM_BENCHMARKS_WORKLOADS_H_

#include <cstddef>
#include <optional>
#include <string>

#include <benchmark/benchmark.h>

namespace idem::bench {

// One store under test. The first error opening it is kept so that later
// runs skip at once (an unreachable server costs a connect timeout each).
struct StoreSpec {
  std::string label;
  std::string uri;  // "" for the ShardedMutexStore baseline.
  std::optional<std::string> store_error;
  std::optional<std::string> raw_error;
};

// Whether the spec is the memory store or the sharded-mutex baseline.
bool InMemory(const StoreSpec& spec);

enum class Workload {
  kClaim,
  kClaimComplete,
  kReplay,
  kHotKeyInProgress,
  kHotKeyCompleted,
  kZipf,
};

const char* WorkloadName(Workload w);

// One of the workloads above on the store of `spec`.
void BM_Store(benchmark::State& state, StoreSpec* spec, Workload workload);

// Every thread claims one key whose 100 us ttl expires as the threads'
// clocks move on by 1 us per iteration: whoever acquires completes it.
void BM_HotKeyExpiring(benchmark::State& state, StoreSpec* spec);

// Each thread renews its own claim (Store::ExtendLock) every iteration
// (renewal.cc).
void BM_ExtendLock(benchmark::State& state, StoreSpec* spec);

// Calls ClaimAsync and CompleteAsync kept in flight by one thread
// (async_calls.cc).
inline constexpr int kAsyncInFlight = 32;

// ClaimComplete with kAsyncInFlight asynchronous calls in flight from one
// thread (async_calls.cc); skipped for a store without them.
void BM_ClaimCompleteAsync(benchmark::State& state, StoreSpec* spec);

// The engine's own write (raw_ops.h) on the engine of `spec`.
void BM_RawWrite(benchmark::State& state, StoreSpec* spec);

enum class Hash { kFingerprint, kRecordId, kSha256 };

// `hash` of `size` bytes.
void BM_Hash(benchmark::State& state, Hash hash, std::size_t size);

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_WORKLOADS_H_
