// ClaimLease: lock renewal for one claim (GuardOptions::lock_renewal), for an
// adapter that runs a slow handler and renews the claim on its own timer.
// Guard::Run and RunOnce renew by themselves; an async adapter does
//
//   if (auto lease = d.claim.lease()) {      // null when renewal is off
//     every lease->interval() while the handler runs: lease->Renew();
//   }
//   d.claim.Finish(response);   // ends the lease
//
// Renew extends the claim's lock to now + lock_timeout (Store::ExtendLock).
// A renewal that finds the claim lost (the lock had timed out and a retry
// took it over, or the record was revoked) logs a warning naming the record,
// counts renewal_lost and tells the observers; the handler's Finish then
// ends as kStaleComplete, as it would have without renewal. A store error
// is logged and the claim kept: the next renewal tries again.
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

enum class RenewResult {
  kRenewed,      // The claim is held until now + lock_timeout.
  kLost,         // Another request holds the key now (renewal_lost).
  kStoreFailed,  // The store call failed; the claim may still be held.
  kEnded,        // The claim was finished, abandoned or forgotten: nothing
                 // was renewed and nothing reported. Stop renewing.
};

class ClaimLease {
 public:
  // Made by ClaimHandle::lease().
  ClaimLease(Guard& guard, const RecordId& id, const Token& token,
             Duration lock_timeout, Duration interval);
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
  const RecordId& record_id() const { return id_; }

 private:
  Guard& guard_;
  const RecordId id_;
  const Token token_;
  const Duration lock_timeout_;
  const Duration interval_;
  std::atomic<bool> ended_{false};
  std::atomic<bool> lost_{false};
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
