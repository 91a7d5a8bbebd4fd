#include "guard_renewal.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "baseline/sharded_mutex_store.h"
#include "idem/guard.h"

namespace idem::bench {
namespace {

using std::chrono::seconds;

// Keys cycle per thread over this many; the clock moves past the ttl at
// every cycle, so a key is always claimed afresh (executed, never replayed)
// and the store stays small.
constexpr std::uint64_t kKeysPerCycle = 1 << 16;

struct GuardRun {
  std::shared_ptr<ManualClock> clock;
  std::unique_ptr<Guard> guard;
};

std::atomic<GuardRun*> current{nullptr};

void BM_GuardRun(benchmark::State& state, bool renewal) {
  if (state.thread_index() == 0) {
    auto run = new GuardRun;
    run->clock = std::make_shared<ManualClock>();
    GuardSetup setup;
    setup.store = std::make_shared<bench::ShardedMutexStore>(
        kKeysPerCycle * static_cast<std::uint64_t>(state.threads()));
    setup.clock = run->clock;
    setup.options.ttl = seconds(1);
    setup.options.lock_timeout = seconds(60);
    setup.options.lock_renewal = renewal ? seconds(20) : Duration::zero();
    auto guard = Guard::Create(std::move(setup));
    if (!guard) {
      state.SkipWithError(guard.error().ToString().c_str());
      delete run;
      return;
    }
    run->guard = std::move(*guard);
    current.store(run);
  }
  const std::uint64_t thread = static_cast<std::uint64_t>(state.thread_index());
  std::uint64_t next = 0;
  std::uint64_t unexpected = 0;
  std::string key;
  const HeaderView headers[] = {{"Idempotency-Key", ""}};
  HeaderView request_headers[1];
  for (auto _ : state) {
    GuardRun* run = current.load(std::memory_order_acquire);
    if (run == nullptr) break;
    if (next % kKeysPerCycle == 0 && next > 0) run->clock->Advance(seconds(2));
    key = std::to_string(thread) + "-" + std::to_string(next++ % kKeysPerCycle);
    request_headers[0] = {headers[0].first, key};
    RequestView request;
    request.method = "POST";
    request.target = "/orders";
    request.headers = request_headers;
    request.body = "{}";
    RunInfo info;
    Response response = run->guard->Run(
        request,
        [] {
          return Response{201, {}, "order"};
        },
        nullptr, &info);
    benchmark::DoNotOptimize(response);
    if (info.outcome != Outcome::kExecuted) ++unexpected;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["unexpected"] =
      benchmark::Counter(static_cast<double>(unexpected));
  if (state.thread_index() == 0) {
    // Every thread has left the loop (Google Benchmark's end barrier).
    delete current.exchange(nullptr);
  }
}

}  // namespace

void RegisterGuardRenewal() {
  for (const bool renewal : {false, true}) {
    benchmark::RegisterBenchmark(
        renewal ? "GuardRun/renewal_on" : "GuardRun/renewal_off",
        [renewal](benchmark::State& state) { BM_GuardRun(state, renewal); })
        ->UseRealTime()
        ->Threads(1)
        ->Threads(2);
  }
}

}  // namespace idem::bench
