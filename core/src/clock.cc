#include "idem/clock.h"

#include <algorithm>
#include <condition_variable>
#include <thread>

namespace idem {

namespace {

// Waits on a condition variable; `real_time` bounds each wait by the time
// left on the clock, otherwise only a Wake (ManualClock's advance) ends it.
class CondVarWaiter : public ClockWaiter {
 public:
  CondVarWaiter(const Clock& clock, bool real_time)
      : clock_(clock), real_time_(real_time) {}

  void WaitUntil(TimePoint deadline) override {
    std::unique_lock<std::mutex> lock(mu_);
    while (!woken_) {
      const TimePoint now = clock_.Now();
      if (now >= deadline) break;
      if (real_time_) {
        // A relative wait on the steady clock: a wall-clock jump neither
        // stalls nor hurries the waiter beyond one wait. Capped so that a
        // distant deadline (TimePoint::max: "until woken") cannot overflow.
        cv_.wait_for(lock,
                     std::min<Duration>(deadline - now, std::chrono::hours(1)));
        break;
      }
      cv_.wait(lock);
    }
    woken_ = false;
  }

  void Wake() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
    }
    cv_.notify_all();
  }

 private:
  const Clock& clock_;
  const bool real_time_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
};

}  // namespace

std::unique_ptr<ClockWaiter> Clock::NewWaiter() {
  return std::make_unique<CondVarWaiter>(*this, true);
}

TimePoint SystemClock::Now() const { return std::chrono::system_clock::now(); }

void SystemClock::SleepFor(Duration d) { std::this_thread::sleep_for(d); }

std::shared_ptr<SystemClock> SystemClock::Instance() {
  static const auto instance = std::make_shared<SystemClock>();
  return instance;
}

// Registered with its ManualClock for its lifetime, so that Advance and Set
// wake it.
class ManualClockWaiter final : public CondVarWaiter {
 public:
  explicit ManualClockWaiter(ManualClock& clock)
      : CondVarWaiter(clock, false), clock_(clock) {
    std::lock_guard<std::mutex> lock(clock_.waiters_mu_);
    clock_.waiters_.push_back(this);
  }
  ~ManualClockWaiter() override {
    std::lock_guard<std::mutex> lock(clock_.waiters_mu_);
    auto& w = clock_.waiters_;
    w.erase(std::remove(w.begin(), w.end(), this), w.end());
  }

 private:
  ManualClock& clock_;
};

std::unique_ptr<ClockWaiter> ManualClock::NewWaiter() {
  return std::make_unique<ManualClockWaiter>(*this);
}

void ManualClock::WakeWaiters() {
  std::lock_guard<std::mutex> lock(waiters_mu_);
  for (ClockWaiter* waiter : waiters_) waiter->Wake();
}

std::size_t ManualClock::WaiterCount() {
  std::lock_guard<std::mutex> lock(waiters_mu_);
  return waiters_.size();
}

void ManualClock::SleepFor(Duration d) {
  Advance(d);
  std::function<void(Duration)> hook;
  {
    std::lock_guard<std::mutex> lock(hook_mu_);
    hook = hook_;
  }
  if (hook) hook(d);
}

void ManualClock::SetSleepHook(std::function<void(Duration)> hook) {
  std::lock_guard<std::mutex> lock(hook_mu_);
  hook_ = std::move(hook);
}

}  // namespace idem
