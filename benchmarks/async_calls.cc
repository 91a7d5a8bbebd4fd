// BM_ClaimCompleteAsync (workloads.h): ClaimComplete through the store's
// asynchronous calls (Store::ClaimAsync, CompleteAsync), as an adapter's
// I/O thread makes them when Info().async_calls is true: one benchmark
// thread keeps kInFlight claims of new keys in flight, each followed, in
// its callback, by its CompleteAsync; an iteration ends when a slot is
// free again. A store without asynchronous calls is skipped (its
// ClaimAsync is the synchronous call, made inside).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "bench_util.h"
#include "idem/response.h"
#include "idem/store.h"
#include "run_state.h"
#include "workloads.h"

namespace idem::bench {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

// Keys of this benchmark, apart from other workloads'.
constexpr std::uint64_t kAsyncBase = std::uint64_t{9} << 56;
constexpr int kWarmUpCalls = 2 * kAsyncInFlight;

// The calls in flight: a window of kAsyncInFlight slots and the first
// error.
class Window {
 public:
  // Waits for a free slot and takes it; false after an error.
  bool Take() {
    std::unique_lock<std::mutex> lock(mu_);
    freed_.wait(lock, [&] { return in_flight_ < kAsyncInFlight || error_; });
    if (error_) return false;
    ++in_flight_;
    return true;
  }
  void Give(std::optional<std::string> error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
      if (error && !error_) error_ = std::move(error);
    }
    freed_.notify_one();
  }
  // Waits until nothing is in flight; the first error, if any.
  std::optional<std::string> Drain() {
    std::unique_lock<std::mutex> lock(mu_);
    freed_.wait(lock, [&] { return in_flight_ == 0; });
    return error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable freed_;
  int in_flight_ = 0;
  std::optional<std::string> error_;
};

// Claims `key` and completes it; gives the slot back when done.
void ClaimThenComplete(Store& store, std::uint64_t key,
                       const std::shared_ptr<const Response>& response,
                       Window& window) {
  const RecordId id = IdFor(key);
  store.ClaimAsync(id, BenchFingerprint(), kStart, hours(24), seconds(60),
                   [&store, &window, id, response](Result<ClaimResult> claim) {
                     if (!claim) return window.Give(claim.error().ToString());
                     if (claim->outcome != ClaimOutcome::kAcquired) {
                       return window.Give("a new key was not acquired");
                     }
                     store.CompleteAsync(
                         id, claim->token, response,
                         [&window](Result<bool> done) {
                           if (done && *done) return window.Give({});
                           window.Give(done ? "Complete returned false"
                                            : done.error().ToString());
                         });
                   });
}

}  // namespace

void BM_ClaimCompleteAsync(benchmark::State& state, StoreSpec* spec) {
  const auto response = std::make_shared<const Response>(BenchResponse());
  Window window;
  std::uint64_t next = kAsyncBase;
  if (Run* opened = OpenRun(state, *spec, 0, /*raw=*/false)) {
    if (!opened->store->Info().async_calls) {
      state.SkipWithError("the store has no asynchronous calls");
      CloseRun(state);
    } else {
      // The loop's thread and connection start at the first call.
      for (int i = 0; i < kWarmUpCalls && window.Take(); ++i) {
        ClaimThenComplete(*opened->store, next++, response, window);
      }
      if (auto error = window.Drain()) {
        state.SkipWithError(("warm-up: " + *error).c_str());
        CloseRun(state);
      }
    }
  }
  Run* run = nullptr;
  for (auto _ : state) {
    if (run == nullptr && (run = CurrentRun(state)) == nullptr) break;
    if (!window.Take()) break;
    ClaimThenComplete(*run->store, next++, response, window);
  }
  if (auto error = window.Drain()) state.SkipWithError(error->c_str());
  state.SetItemsProcessed(state.iterations());
  CloseRun(state);
}

}  // namespace idem::bench
