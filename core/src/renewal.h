// Lock renewal's machinery inside the core: the Guard's renewal thread for
// the blocking APIs (Guard::Run, RunOnce) and the Guard's private parts a
// ClaimLease uses. Not installed; see claim_lease.h for the contract.

#ifndef IDEM_CORE_SRC_RENEWAL_H_
#define IDEM_CORE_SRC_RENEWAL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "idem/claim_lease.h"
#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/log.h"
#include "idem/observer.h"

namespace idem::detail {

// One thread that renews every lease added to it, each every interval() of
// the clock (a failed renewal again retry_interval() after it started:
// ClaimLease::DelayAfter), until it is removed or its renewal ends (lost,
// ended). Waits on
// a ClockWaiter, so a ManualClock test drives it by advancing time.
//
// Thread-safety: Add and Remove from any thread.
class Renewer {
 public:
  explicit Renewer(Clock& clock);
  ~Renewer();  // Stops the thread; a renewal in flight completes first.
  Renewer(const Renewer&) = delete;
  Renewer& operator=(const Renewer&) = delete;

  // First renewal one interval from now. Returns a ticket for Remove.
  std::uint64_t Add(std::shared_ptr<ClaimLease> lease);
  void Remove(std::uint64_t ticket);

 private:
  struct Entry {
    std::shared_ptr<ClaimLease> lease;
    TimePoint due;
  };

  void Loop();

  Clock& clock_;
  std::unique_ptr<ClockWaiter> waiter_;
  std::mutex mu_;
  std::map<std::uint64_t, Entry> entries_;  // By ticket.
  std::uint64_t next_ticket_ = 1;
  // What the thread waits for (TimePoint::min while it is not waiting), so
  // that Add wakes it only for a lease due earlier.
  TimePoint waiting_until_ = TimePoint::min();
  bool stop_ = false;
  std::thread thread_;  // Last: starts after everything it uses.
};

// The Guard's private parts that lock renewal uses.
struct GuardRenewal {
  // The Guard's renewal thread, started on the first call.
  static Renewer& RenewerOf(Guard& guard);
  static void Log(const Guard& guard, LogLevel level,
                  const std::string& message) {
    guard.Log(level, message);
  }
  static void Notify(Guard& guard, const RenewalEvent& event) {
    guard.NotifyRenewal(event);
  }
};

}  // namespace idem::detail

#endif  // IDEM_CORE_SRC_RENEWAL_H_
