// BM_ExtendLock (workloads.h): what a lock renewal costs on each store.
//
// Each thread holds one claim of its own key and renews it every
// iteration, its clock 1 us later each time, so that every renewal moves
// locked_until and writes (a renewal that would not move it may skip the
// write). The claim is made on the thread's first iteration with the timer
// paused: the loop times renewals only.

#include <chrono>
#include <cstdint>
#include <string>

#include "bench_util.h"
#include "idem/store.h"
#include "run_state.h"
#include "workloads.h"

namespace idem::bench {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::seconds;

// Keys of this benchmark: each thread's own, apart from other workloads'.
constexpr std::uint64_t kRenewBase = std::uint64_t{7} << 56;

}  // namespace

void BM_ExtendLock(benchmark::State& state, StoreSpec* spec) {
  OpenRun(state, *spec, static_cast<std::size_t>(state.threads()),
          /*raw=*/false);
  const RecordId id = IdFor(
      kRenewBase + (static_cast<std::uint64_t>(state.thread_index()) << 40));
  TimePoint now = kStart;
  Token token;
  Run* run = nullptr;
  for (auto _ : state) {
    if (run == nullptr) {
      state.PauseTiming();
      run = CurrentRun(state);
      std::string error;
      if (run != nullptr) {
        auto claim = run->store->Claim(id, BenchFingerprint(), now, hours(24),
                                       seconds(60));
        if (!claim) {
          error = claim.error().ToString();
        } else if (claim->outcome != ClaimOutcome::kAcquired) {
          error = "a new key was not acquired";
        } else {
          token = claim->token;
        }
      }
      state.ResumeTiming();
      if (run == nullptr) break;
      if (!error.empty()) {
        state.SkipWithError(error.c_str());
        break;
      }
    }
    now += microseconds(1);
    auto renewed = run->store->ExtendLock(id, token, now, seconds(60));
    if (!renewed || !*renewed) {
      state.SkipWithError(renewed ? "ExtendLock returned false"
                                  : renewed.error().ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  CloseRun(state);
}

}  // namespace idem::bench
