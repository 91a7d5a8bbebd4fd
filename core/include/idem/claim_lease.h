// ClaimLease: lock renewal for one claim (GuardOptions::lock_renewal), for an
// adapter that runs a slow handler and renews the claim on its own timer.
// Guard::Run and RunOnce renew by themselves; an async adapter does
//
//   if (auto lease = d.claim.lease()) {      // null when renewal is off
//     while the handler runs: r = lease->Renew(); then wait
//     lease->DelayAfter(r) from the start of that renewal;
//   }
//   d.claim.Finish(response);   // ends the lease
//
// Renew extends the claim's lock to now + lock_timeout (Store::ExtendLock).
// A renewal that finds the claim lost (the lock had timed out and a retry
// took it over, or the record was revoked) logs a warning naming the record,
// counts renewal_lost and tells the observers; the handler's Finish then
// ends as kStaleComplete, as it would have without renewal. A store error
// is logged and the claim kept: the next renewal comes retry_interval()
// after the failed one started (GuardOptions::lock_renewal_retry), not a
// whole interval later: when the store answers again, the holder's renewal
// reaches it within retry_interval() (plus its own call), which bounds how
// long a retry that finds the lock timed out has to take the key over.
//
// What the handler can know (State(), ClaimHandle::lock_state()): the lock
// is kHeld while the claim's lock or its last successful renewal has not
// timed out and no renewal failed since; kMayBeLost once a renewal failed
// or lock_timeout passed since then (a retry may take the key over: check
// before a side effect that must not run twice); kLost once a renewal found
// the key taken over or revoked. A later successful renewal makes it kHeld
// again: the store confirmed that nobody took the key over meanwhile (a
// takeover changes the token, so the renewal would have found it lost).
//
// Thread-safety: Renew and End may be called from any thread, concurrently
// with each other and with the ClaimHandle's Finish, Abandon or Forget,
// which end the lease: a renewal that races with them returns kEnded and
// reports nothing (the claim was not lost, it was finished). The lease must
// not outlive the Guard that made it.

#ifndef IDEM_CLAIM_LEASE_H_
#define IDEM_CLAIM_LEASE_H_

#include <atomic>
#include <cstdint>

#include "idem/clock.h"
#include "idem/types.h"

namespace idem {

class ClaimHandle;
class Guard;

// Where a claim's lock stands, as far as its holder knows (above).
enum class LockState {
  kHeld,       // No renewal failed and the lock has not timed out.
  kMayBeLost,  // A renewal failed, or lock_timeout passed since the claim
               // or its last successful renewal: a retry may take over.
  kLost,       // A renewal found the key taken over or revoked.
  kEnded,      // The claim was finished, released or forgotten.
};

enum class RenewResult {
  kRenewed,      // The claim is held until now + lock_timeout.
  kLost,         // Another request holds the key now (renewal_lost).
  kStoreFailed,  // The store call failed; the claim may still be held.
  kEnded,        // The claim was finished, abandoned or forgotten: nothing
                 // was renewed and nothing reported. Stop renewing.
};

class ClaimLease {
 public:
  // Made by ClaimHandle::lease(). `locked_until`: the lock's end when the
  // lease is made (the claim's).
  ClaimLease(Guard& guard, const RecordId& id, const Token& token,
             Duration lock_timeout, Duration interval, Duration retry_interval,
             TimePoint locked_until);
  ClaimLease(const ClaimLease&) = delete;
  ClaimLease& operator=(const ClaimLease&) = delete;

  // One renewal now. Blocks on the store (an async adapter calls it where it
  // runs its other store calls). After kLost or kEnded every later call
  // returns the same without a store call.
  RenewResult Renew();

  // Ends the lease: later renewals return kEnded without a store call, and
  // one in flight reports nothing.
  void End() { ended_.store(true, std::memory_order_seq_cst); }
  bool ended() const { return ended_.load(std::memory_order_seq_cst); }

  // How often to renew: the route's lock_renewal (positive).
  Duration interval() const { return interval_; }
  // How soon a failed renewal is tried again: the route's
  // lock_renewal_retry, at most interval().
  Duration retry_interval() const { return retry_interval_; }
  // How long after the start of a renewal that returned `result` the next
  // one is due: retry_interval() after kStoreFailed, interval() otherwise.
  Duration DelayAfter(RenewResult result) const {
    return result == RenewResult::kStoreFailed ? retry_interval_ : interval_;
  }
  // Where the lock stands now, by the Guard's clock (above). Any thread.
  LockState State() const;
  const RecordId& record_id() const { return id_; }

 private:
  Guard& guard_;
  const RecordId id_;
  const Token token_;
  const Duration lock_timeout_;
  const Duration interval_;
  const Duration retry_interval_;
  std::atomic<bool> ended_{false};
  std::atomic<bool> lost_{false};
  // Set by a failed renewal, cleared by a successful one.
  std::atomic<bool> failing_{false};
  // The lock's end as last confirmed by the store (TimePoint's count).
  std::atomic<Duration::rep> held_until_;
};

namespace detail {

class Renewer;

// Renews `claim` on the Guard's renewal thread (started on first use) for
// the lifetime of this object, when its route has lock_renewal; otherwise
// does nothing (no allocation, no thread). Guard::Run and RunOnce put one
// around the handler call, so a handler that throws stops the renewals.
class RenewWhileRunning {
 public:
  RenewWhileRunning(Guard& guard, ClaimHandle& claim);
  ~RenewWhileRunning();
  RenewWhileRunning(const RenewWhileRunning&) = delete;
  RenewWhileRunning& operator=(const RenewWhileRunning&) = delete;

 private:
  Renewer* renewer_ = nullptr;
  std::uint64_t ticket_ = 0;
};

}  // namespace detail
}  // namespace idem

#endif  // IDEM_CLAIM_LEASE_H_
