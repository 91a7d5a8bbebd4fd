// Time source for the Guard and the stores.
//
// Every expiry and lock decision takes `now` from an injected Clock so tests
// can move time with ManualClock instead of sleeping.
//
// Thread-safety: all Clock implementations here are safe for concurrent use.

#ifndef IDEM_CLOCK_H_
#define IDEM_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

namespace idem {

using TimePoint = std::chrono::system_clock::time_point;
using Duration = std::chrono::system_clock::duration;

// Nanoseconds since the Unix epoch: how records, columns and rows store a
// TimePoint. Exact for every TimePoint (system_clock counts nanoseconds).
inline std::int64_t ToUnixNanos(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}
inline TimePoint FromUnixNanos(std::int64_t ns) {
  return TimePoint(
      std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(ns)));
}

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Blocks the calling thread for `d` (used only by the blocking Guard API
  // while it waits for an in-progress request; async adapters use timers).
  virtual void SleepFor(Duration d) = 0;
};

// Wall-clock time. Records carry absolute expiry times, so a clock shared by
// several processes or hosts must be the system clock.
class SystemClock final : public Clock {
 public:
  TimePoint Now() const override;
  void SleepFor(Duration d) override;
  // A process-wide instance.
  static std::shared_ptr<SystemClock> Instance();
};

// A clock that only moves when told to. SleepFor advances it by the requested
// amount and then runs the sleep hook, which lets a test act "while" a caller
// waits (complete the record it is waiting on, say) without real sleeping.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint(std::chrono::hours(24 * 365 *
                                                                      50)))
      : now_(start.time_since_epoch().count()) {}

  TimePoint Now() const override {
    return TimePoint(Duration(now_.load(std::memory_order_acquire)));
  }
  void SleepFor(Duration d) override;

  void Advance(Duration d) {
    now_.fetch_add(d.count(), std::memory_order_acq_rel);
  }
  void Set(TimePoint t) {
    now_.store(t.time_since_epoch().count(), std::memory_order_release);
  }
  // Called after every SleepFor with the amount slept.
  void SetSleepHook(std::function<void(Duration)> hook);

 private:
  std::atomic<Duration::rep> now_;
  std::mutex hook_mu_;  // Guards hook_ only; never held while time is read.
  std::function<void(Duration)> hook_;
};

}  // namespace idem

#endif  // IDEM_CLOCK_H_
