// Store and fingerprint micro-benchmarks (results: docs/PERFORMANCE_NOTES.md).
//
// Store workloads, each on the lock-free MemoryStore and on the
// ShardedMutexStore baseline, at 1, 2, 8 and 32 threads:
//  - ClaimCompleteUnique: every iteration claims a key never used before and
//    completes it: the cost of one protected request that runs its handler.
//  - ClaimCompleteHotKey: all threads claim one key; whoever acquires
//    completes, the others see it in progress or replay it. Time moves on
//    1 us per iteration with a 100 us ttl, so the key keeps expiring and being
//    acquired again; the outcome counters show the mix.
// Fingerprint: ComputeFingerprint of a POST with a 1 KiB body against a bare
// SHA-256 of the same 1 KiB, to read off the cost of the framing.
//
// Times are wall-clock (UseRealTime): with N threads the reported time per
// iteration is wall time / total iterations, i.e. the inverse of throughput.
// Each run of a store benchmark gets a fresh store sized for its iterations,
// built before and destroyed after the timed loop. The unique-key runs have
// a fixed total iteration count (kUniqueKeysPerRun) instead of a minimum
// time, so every run fills its store to the same size.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "idem/clock.h"
#include "idem/fingerprint.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/types.h"
#include "support/sharded_mutex_store.h"

#ifdef IDEM_BENCH_HAVE_MEMORY
#include "idem/memory_store.h"
#endif

// Allocation counts per thread, for the allocs_per_op and alloc_bytes_per_op
// counters: on these workloads allocation is most of the cost, so the count
// explains the times. Thread-local, so counting adds no contention.
namespace {
thread_local std::uint64_t t_allocations = 0;
thread_local std::uint64_t t_allocated_bytes = 0;
}  // namespace

void* operator new(std::size_t size) {
  ++t_allocations;
  t_allocated_bytes += size;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace idem {
namespace {

// Reports the allocations this thread made since the counter was created,
// per iteration of the run (summed over threads).
struct AllocationCounter {
  std::uint64_t allocations = t_allocations;
  std::uint64_t bytes = t_allocated_bytes;

  void Report(benchmark::State& state) const {
    using benchmark::Counter;
    state.counters["allocs_per_op"] =
        Counter(static_cast<double>(t_allocations - allocations),
                Counter::kAvgIterations);
    state.counters["alloc_bytes_per_op"] =
        Counter(static_cast<double>(t_allocated_bytes - bytes),
                Counter::kAvgIterations);
  }
};

using bench::BenchFingerprint;
using bench::BenchResponse;
using bench::IdFor;
using bench::kStart;
using std::chrono::hours;
using std::chrono::microseconds;

// Both stores behind one interface; `records` is how many records the run
// will create at most.
struct MemoryBackend {
  static Result<std::unique_ptr<Store>> Open(std::size_t records) {
#ifdef IDEM_BENCH_HAVE_MEMORY
    MemoryStoreOptions options;
    options.capacity = std::clamp<std::size_t>(records + records / 8 + 1024, 1,
                                               MemoryStore::kMaxCapacity);
    // Bounded by records only: the byte budget's default would stop a run of
    // a million stored responses halfway.
    options.max_bytes = MemoryStore::kMaxMaxBytes;
    auto store = MemoryStore::Open(options);
    if (!store) return tl::make_unexpected(store.error());
    return std::unique_ptr<Store>(std::move(*store));
#else
    (void)records;
    return MakeError(ErrorCode::kInvalidArgument,
                     "built without the memory store");
#endif
  }
};

struct ShardedMutexBackend {
  static Result<std::unique_ptr<Store>> Open(std::size_t records) {
    return std::unique_ptr<Store>(
        std::make_unique<testing::ShardedMutexStore>(records));
  }
};

// The store of the current run: made by thread 0 before the timed loop and
// destroyed by it after. The loop's start and end are barriers across the
// run's threads, so every thread sees it set for the whole loop. When it
// cannot be made, thread 0 skips the run and the others find it null.
std::unique_ptr<Store> g_store;

template <typename Backend>
void SetUpRun(benchmark::State& state, std::size_t records) {
  if (state.thread_index() != 0) return;
  auto store = Backend::Open(records);
  if (!store) {
    state.SkipWithError(store.error().ToString().c_str());
    return;
  }
  g_store = std::move(*store);
}

// The run's store, read once the loop has started; null (and the thread's
// run skipped) when SetUpRun failed.
Store* RunStore(benchmark::State& state) {
  Store* store = g_store.get();
  if (store == nullptr) state.SkipWithError("no store for this run");
  return store;
}

void TearDownRun(benchmark::State& state) {
  if (state.thread_index() == 0) g_store.reset();
}

// Keys never repeat within a run: the thread index in the high bits, the
// iteration below. A fresh store per run keeps runs from meeting old keys.
template <typename Backend>
void BM_ClaimCompleteUnique(benchmark::State& state) {
  const std::size_t records =
      static_cast<std::size_t>(state.max_iterations) * state.threads();
  SetUpRun<Backend>(state, records);
  const Fingerprint fp = BenchFingerprint();
  // The Guard hands the store a response it built once per request; the
  // store keeps it (CompleteShared) instead of copying it.
  const auto response = std::make_shared<const Response>(BenchResponse());
  std::uint64_t key = static_cast<std::uint64_t>(state.thread_index()) << 40;
  Store* store = nullptr;
  const AllocationCounter allocations;

  for (auto _ : state) {
    if (store == nullptr && (store = RunStore(state)) == nullptr) break;
    const RecordId id = IdFor(key++);
    auto claim =
        store->Claim(id, fp, kStart, hours(24), std::chrono::seconds(60));
    if (!claim) {
      state.SkipWithError(claim.error().ToString().c_str());
      break;
    }
    if (claim->outcome != ClaimOutcome::kAcquired) {
      state.SkipWithError("a new key was not acquired");
      break;
    }
    auto done = store->CompleteShared(id, claim->token, response);
    if (!done || !*done) {
      state.SkipWithError(done ? "Complete returned false"
                               : done.error().ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  allocations.Report(state);
  TearDownRun(state);
}

// One claim on the hot key; returns an error message, or "" (no allocation).
std::string HotKeyStep(Store& store, const RecordId& id, const Fingerprint& fp,
                       TimePoint now, const Response& response,
                       std::int64_t (&outcomes)[5]) {
  const auto ttl = microseconds(100);
  auto claim = store.Claim(id, fp, now, ttl, ttl);
  if (!claim) return claim.error().ToString();
  ++outcomes[static_cast<int>(claim->outcome)];
  switch (claim->outcome) {
    case ClaimOutcome::kAcquired: {
      auto done = store.Complete(id, claim->token, response);
      if (!done) return done.error().ToString();
      // False when a thread whose clock ran ahead found the record expired
      // and claimed it afresh in between.
      if (!*done) ++outcomes[4];
      return {};
    }
    case ClaimOutcome::kInProgress:
      return {};
    case ClaimOutcome::kCompleted:
      benchmark::DoNotOptimize(claim->response->body.data());
      return {};
    case ClaimOutcome::kMismatch:
      return "mismatch on a single fingerprint";
  }
  return "unknown outcome";
}

template <typename Backend>
void BM_ClaimCompleteHotKey(benchmark::State& state) {
  SetUpRun<Backend>(state, 16);
  const RecordId id = IdFor(0xC0FFEE);
  const Fingerprint fp = BenchFingerprint();
  const Response& response = BenchResponse();
  // Each thread's clock moves 1 us per iteration; threads read slightly
  // different times, as threads reading a real clock do.
  TimePoint now = kStart;
  // Indexed by ClaimOutcome, then [4]: Complete returned false.
  std::int64_t outcomes[5] = {};
  Store* store = nullptr;
  const AllocationCounter allocations;

  for (auto _ : state) {
    if (store == nullptr && (store = RunStore(state)) == nullptr) break;
    now += microseconds(1);
    const std::string error =
        HotKeyStep(*store, id, fp, now, response, outcomes);
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  // Shares of all claims (summed over threads, divided by all iterations).
  using benchmark::Counter;
  auto share = [&](std::int64_t n) {
    return Counter(static_cast<double>(n), Counter::kAvgIterations);
  };
  state.counters["acquired"] =
      share(outcomes[static_cast<int>(ClaimOutcome::kAcquired)]);
  state.counters["in_progress"] =
      share(outcomes[static_cast<int>(ClaimOutcome::kInProgress)]);
  state.counters["replayed"] =
      share(outcomes[static_cast<int>(ClaimOutcome::kCompleted)]);
  state.counters["stale_complete"] = share(outcomes[4]);
  allocations.Report(state);
  TearDownRun(state);
}

constexpr std::size_t kBodySize = 1024;

std::string Body() {
  std::string body(kBodySize, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) {
    body[i] = static_cast<char>('a' + i % 26);
  }
  return body;
}

void BM_Fingerprint1KiB(benchmark::State& state) {
  const std::string body = Body();
  const FingerprintInput input{.method = "POST",
                               .target = "/orders?source=bench",
                               .headers = {},
                               .body = body,
                               .body_mode = BodyFingerprint::kRaw};
  for (auto _ : state) {
    Fingerprint fp = ComputeFingerprint(input);
    benchmark::DoNotOptimize(fp);
  }
  state.SetBytesProcessed(state.iterations() * kBodySize);
}

void BM_Sha256_1KiB(benchmark::State& state) {
  const std::string body = Body();
  for (auto _ : state) {
    auto digest = Sha256(body);
    benchmark::DoNotOptimize(digest);
  }
  state.SetBytesProcessed(state.iterations() * kBodySize);
}

// Every run of the unique-key benchmark inserts this many keys in all, split
// evenly over its threads, into a fresh store: each run ends with a store of
// the same size whatever the thread count, so ns/op compares like with like
// (a bigger table costs more cache misses per claim).
constexpr benchmark::IterationCount kUniqueKeysPerRun = 1 << 20;
constexpr int kThreadCounts[] = {1, 2, 8, 32};

template <typename Backend>
void RegisterStoreBenchmarks(const std::string& backend) {
  for (int threads : kThreadCounts) {
    benchmark::RegisterBenchmark(
        ("BM_ClaimCompleteUnique<" + backend + ">").c_str(),
        BM_ClaimCompleteUnique<Backend>)
        ->UseRealTime()
        ->Threads(threads)
        ->Iterations(kUniqueKeysPerRun / threads);
  }
  benchmark::RegisterBenchmark(
      ("BM_ClaimCompleteHotKey<" + backend + ">").c_str(),
      BM_ClaimCompleteHotKey<Backend>)
      ->UseRealTime()
      ->Threads(1)
      ->Threads(2)
      ->Threads(8)
      ->Threads(32);
}

int RegisterAll() {
#ifdef IDEM_BENCH_HAVE_MEMORY
  RegisterStoreBenchmarks<MemoryBackend>("Memory");
#endif
  RegisterStoreBenchmarks<ShardedMutexBackend>("ShardedMutex");
  const std::pair<const char*, void (*)(benchmark::State&)> hashes[] = {
      {"BM_Fingerprint1KiB", BM_Fingerprint1KiB},
      {"BM_Sha256_1KiB", BM_Sha256_1KiB}};
  for (const auto& [name, fn] : hashes) {
    benchmark::RegisterBenchmark(name, fn)
        ->UseRealTime()
        ->Threads(1)
        ->Threads(2)
        ->Threads(8)
        ->Threads(32);
  }
  return 0;
}

// Registered in this order at static initialization, before
// benchmark_main's main() runs them.
[[maybe_unused]] const int kRegistered = RegisterAll();

}  // namespace
}  // namespace idem
