// What the observer hook costs a request: Guard::Begin + ClaimHandle::Finish
// of a new key on the memory store, with no observer (label none: the list
// is empty, the only cost the hook may add) against one observer that does
// nothing (label noop: the virtual calls and the events). Rows, registered
// here and run by idem-bench beside its other workloads:
//
//   GuardObservers/none/iterations:<I>/real_time/threads:<N>
//   GuardObservers/noop/iterations:<I>/real_time/threads:<N>
//
// N in {1, 2}. Like the in-memory store workloads (registration.cc), each
// run inserts a fixed number of keys, so both labels are measured on tables
// of one size; every run gets a fresh store and Guard, made by thread 0
// before the timed loop (whose start is the barrier the others wait at).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "idem/guard.h"
#include "idem/observer.h"
#include "idem/open_store.h"

namespace idem::bench {
namespace {

constexpr benchmark::IterationCount kKeysPerRun = 1 << 18;

class NoopObserver final : public GuardObserver {
 public:
  void OnDecision(const DecisionEvent& e) override {
    benchmark::DoNotOptimize(&e);
  }
  void OnFinish(const FinishEvent& e) override { benchmark::DoNotOptimize(&e); }
};

// The run's Guard: written by thread 0 before the loop, read by all inside.
std::unique_ptr<Guard> run_guard;

void BM_GuardObservers(benchmark::State& state, int observers) {
  if (state.thread_index() == 0) {
    StoreOptions store_options;
    store_options.sweep_interval = std::chrono::seconds(0);
    auto store = OpenStore("memory:?capacity=1000000", store_options);
    GuardSetup setup;
    if (store) setup.store = std::shared_ptr<Store>(std::move(*store));
    for (int i = 0; i < observers; ++i) {
      setup.observers.push_back(std::make_shared<NoopObserver>());
    }
    auto guard = Guard::Create(std::move(setup));
    if (!guard) {
      state.SkipWithError(guard.error().ToString().c_str());
    } else {
      run_guard = std::move(*guard);
    }
  }
  const Response& response = BenchResponse();
  const std::uint64_t thread = static_cast<std::uint64_t>(state.thread_index());
  std::uint64_t next = 0;
  std::string key;
  HeaderView headers[] = {{"Idempotency-Key", ""}};
  RequestView request;
  request.method = "POST";
  request.target = "/orders";
  request.route = "/orders";
  request.body = R"({"amount":1999,"currency":"EUR"})";
  request.scope = "tenant";
  for (auto _ : state) {
    if (!run_guard) break;
    key = std::to_string((thread << 40) + next++);
    headers[0].second = key;
    request.headers = headers;
    Decision d = run_guard->Begin(request);
    if (d.action != Action::kExecute) {
      state.SkipWithError("a new key was not executed");
      break;
    }
    if (d.claim.Finish(response) != FinishResult::kStored) {
      state.SkipWithError("the response was not stored");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    // Every thread has left the loop: the end of the loop is a barrier too.
    run_guard.reset();
  }
}

[[maybe_unused]] const bool registered = [] {
  for (const auto& [label, observers] :
       {std::pair{"none", 0}, std::pair{"noop", 1}}) {
    for (int threads : {1, 2}) {
      benchmark::RegisterBenchmark(
          (std::string("GuardObservers/") + label).c_str(), BM_GuardObservers,
          observers)
          ->UseRealTime()
          ->Threads(threads)
          ->Iterations(kKeysPerRun / threads);
    }
  }
  return true;
}();

}  // namespace
}  // namespace idem::bench
