#include "idem/clock.h"

#include <thread>

namespace idem {

TimePoint SystemClock::Now() const { return std::chrono::system_clock::now(); }

void SystemClock::SleepFor(Duration d) { std::this_thread::sleep_for(d); }

std::shared_ptr<SystemClock> SystemClock::Instance() {
  static const auto instance = std::make_shared<SystemClock>();
  return instance;
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
