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
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

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

class Clock;

// Lets one background thread wait for a time of its Clock (the Guard's lock
// renewal thread), so that a ManualClock test moves it by advancing time.
//
// Thread-safety: WaitUntil is called by one thread at a time; Wake from any
// thread.
class ClockWaiter {
 public:
  virtual ~ClockWaiter() = default;
  // Returns when the clock reads `deadline` or later, or after a Wake (one
  // made before the call counts, once), or spuriously: the caller checks
  // what it waits for again.
  virtual void WaitUntil(TimePoint deadline) = 0;
  virtual void Wake() = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  // Blocks the calling thread for `d` (used only by the blocking Guard API
  // while it waits for an in-progress request; async adapters use timers).
  virtual void SleepFor(Duration d) = 0;
  // A waiter for this clock. Default: one that waits in real time for the
  // distance between Now() and the deadline (right for any clock that
  // moves with real time); ManualClock's wakes when the clock is advanced.
  // The clock must outlive the waiter.
  virtual std::unique_ptr<ClockWaiter> NewWaiter();
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
// Advance and Set wake every waiter (NewWaiter), which then sees the new time.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint(std::chrono::hours(24 * 365 *
                                                                      50)))
      : now_(start.time_since_epoch().count()) {}

  TimePoint Now() const override {
    return TimePoint(Duration(now_.load(std::memory_order_acquire)));
  }
  void SleepFor(Duration d) override;
  std::unique_ptr<ClockWaiter> NewWaiter() override;

  void Advance(Duration d) {
    now_.fetch_add(d.count(), std::memory_order_acq_rel);
    WakeWaiters();
  }
  void Set(TimePoint t) {
    now_.store(t.time_since_epoch().count(), std::memory_order_release);
    WakeWaiters();
  }
  // Called after every SleepFor with the amount slept.
  void SetSleepHook(std::function<void(Duration)> hook);
  // How many waiters (NewWaiter) exist now: lets a test check that nothing
  // waits on this clock.
  std::size_t WaiterCount();

 private:
  friend class ManualClockWaiter;
  void WakeWaiters();

  std::atomic<Duration::rep> now_;
  std::mutex hook_mu_;  // Guards hook_ only; never held while time is read.
  std::function<void(Duration)> hook_;
  // Held while waiters are woken, and by a waiter's destructor: a waiter is
  // never woken after it is gone.
  std::mutex waiters_mu_;
  std::vector<ClockWaiter*> waiters_;
};

}  // namespace idem

#endif  // IDEM_CLOCK_H_
