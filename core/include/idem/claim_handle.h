// ClaimHandle: the right to run the handler for one key the Guard claimed
// (Decision::claim, guard.h), and FinishResult, what storing the handler's
// response did. guard.h includes this header; include either.
//
// Thread-safety: a ClaimHandle is a single-owner value that may move between
// threads; its lock_state() is safe against the renewals. The Guard that
// made it must outlive it.

#ifndef IDEM_CLAIM_HANDLE_H_
#define IDEM_CLAIM_HANDLE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "idem/claim_lease.h"
#include "idem/clock.h"
#include "idem/guard_options.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/types.h"

namespace idem {

// What ClaimHandle::Finish did with the handler's response. Only kStored
// keeps the at-most-once promise for the key; every other value means the
// response was sent unstored and says what a retry will get.
enum class FinishResult {
  kStored,         // Completed: retries replay it.
  kReleased,       // Status not stored: the key was released; a retry runs
                   // the handler again.
  kNotStored,      // Body over max_stored_response: released, warning
                   // logged; a retry runs the handler again.
  kStaleComplete,  // The claim was lost: taken over after its lock timed
                   // out (retries replay the other request's response) or
                   // its record revoked (a retry runs the handler again).
                   // Not stored; a warning saying which is logged.
  kStoreFailed,    // Complete failed; the record stays in_progress until its
                   // lock times out (409 until then, then the handler runs
                   // again). Error logged.
  kInactive,       // The handle held no claim (moved-from or already used).
};

class Guard;

// The right to run the handler for one claimed key. Exactly one of Finish or
// Abandon should be called; destroying an unfinished handle (a handler that
// threw, a dropped connection before the handler ran) releases the key so a
// retry runs the handler again.
class ClaimHandle {
 public:
  ClaimHandle() = default;
  ClaimHandle(ClaimHandle&& other) noexcept { *this = std::move(other); }
  ClaimHandle& operator=(ClaimHandle&& other) noexcept;
  ClaimHandle(const ClaimHandle&) = delete;
  ClaimHandle& operator=(const ClaimHandle&) = delete;
  ~ClaimHandle() { Abandon(); }

  bool active() const { return guard_ != nullptr; }
  // True when this claim took over a request whose lock had timed out.
  bool takeover() const { return takeover_; }
  // The claimed record and the claim's fencing token (for a caller that
  // completes the record itself, e.g. in its own SQL transaction).
  const RecordId& record_id() const { return id_; }
  const Token& token() const { return token_; }
  // For a problem answer the caller makes for this claim (e.g.
  // sql::ClaimLostResponse): the request's path without the query (RunOnce:
  // the operation), and the route's problem_type. Empty on an inactive
  // handle.
  const std::string& instance() const { return instance_; }
  std::string_view problem_type() const {
    return options_ ? std::string_view(options_->problem_type)
                    : std::string_view();
  }

  // Stores `response` for replay, or releases the key, by the table of
  // SEMANTICS.md. Call it before sending the response. Blocks on the store.
  // The response to send is `response` itself, unchanged.
  FinishResult Finish(const Response& response);

  // Finish's store call without blocking, for an adapter's I/O thread on a
  // store whose calls are asynchronous (Guard::calls_store_asynchronously):
  // when Finish(response) would complete the record (a status to store, a
  // body within max_stored_response, no MarkCommitted/MarkClaimLost), puts
  // the response in its stored form, ends the lease, starts
  // Store::CompleteAsync and returns true; `answered` is called once, on
  // the store's thread (or inside this call), when the store answered, and
  // must not block. Then call Finish with the same response, on a thread of
  // the caller's: it makes no store call and ends the claim with the
  // store's answer, as Finish would have. Returns
  // false, doing nothing, in every other case: then call Finish where it
  // may block (it releases the key or ends the claim without a store call).
  // Abandon, Forget or destruction before that Finish end the claim as they
  // would without it, whatever the completion does.
  bool StartFinish(const Response& response, std::function<void()> answered);

  // Releases the key now (the handler failed). Counted as `released`.
  void Abandon();

  // Completing the record in the caller's own SQL transaction
  // (idem/sql_transaction.h; docs/GUIDE.md, "Exactly once"):
  //  - StorableResponse: what Finish(response) would store (status among
  //    stored_statuses, only the stored headers, body within
  //    max_stored_response), or nullopt when Finish would not store it
  //    (then finish the claim as usual). No store call; nullopt on an
  //    inactive handle.
  //  - MarkCommittedInTransaction: the caller's transaction that completed
  //    this claim's record with StorableResponse(response) has committed.
  //    The handle then ends without a store call: the next Finish returns
  //    kStored (pass it the same response), Abandon or destruction release
  //    nothing. Call it only after a successful commit.
  //  - MarkClaimLostInTransaction: the completion reported the claim lost
  //    and the caller rolled back. The next Finish (or Abandon) makes no
  //    store call, counts `stale_complete`, logs a warning and returns
  //    kStaleComplete.
  //  - StopRenewal: ends lock renewal now. sql::RunInTransaction calls it
  //    once the record is completed inside the open transaction, whose locks
  //    keep any other request from taking the key over until it ends: a
  //    renewal blocked on those locks then reports nothing, rather than a
  //    lost claim once the commit completed the record.
  // After any other rollback, finish or abandon the claim as usual.
  std::optional<Response> StorableResponse(const Response& response) const;
  void StopRenewal() { EndLease(); }
  void MarkCommittedInTransaction() {
    if (guard_ != nullptr) in_transaction_ = InTransaction::kCommitted;
  }
  void MarkClaimLostInTransaction() {
    if (guard_ != nullptr) in_transaction_ = InTransaction::kClaimLost;
  }

  // Ends the claim without a store call, for an adapter that could not make
  // the Finish or Abandon call in time: the record stays in_progress until
  // its lock times out (a retry gets 409 until then, then runs the handler).
  // Counted as `store_failed`; `why` is logged as an error with the record.
  // After MarkCommitted/MarkClaimLostInTransaction no store call is needed:
  // it ends the claim as Finish would.
  void Forget(std::string_view why);

  // The route's lock_renewal: how often an adapter renews this claim while
  // the handler runs (claim_lease.h). 0: not renewed (renewal off, or the
  // handle is inactive).
  Duration lock_renewal() const {
    return guard_ != nullptr ? options_->lock_renewal : Duration::zero();
  }
  // The claim's renewal handle, made on the first call and shared after;
  // Finish, Abandon and Forget end it. nullptr when the handle is inactive
  // or the route's lock_renewal is 0 (nothing to renew).
  std::shared_ptr<ClaimLease> lease();

  // Whether this claim still holds its key, as far as the holder knows
  // (claim_lease.h, "What the handler can know"): kHeld while the claim's
  // lock, or with lock_renewal its last successful renewal, has not timed
  // out (by the Guard's clock) and no renewal failed since; kMayBeLost
  // after a failed renewal or once that lock timed out (a retry may take
  // the key over and run the handler again); kLost once a renewal found the
  // key taken over or revoked; kEnded on an inactive handle. No store call.
  // A handler about to make a side effect that must not happen twice
  // checks LockMayBeLost() first and, when true, fails (the key is then
  // released, or its Finish is stale) or completes in its own transaction
  // (exactly once, idem/sql_transaction.h, refuses a lost claim itself).
  // Thread-safe against the renewals; call it where the handle is used.
  LockState lock_state() const;
  bool LockMayBeLost() const { return lock_state() != LockState::kHeld; }

 private:
  friend class Guard;
  // Finish and Abandon after MarkCommitted/MarkClaimLostInTransaction;
  // `status` is the handler's (0 from Abandon), for the observers.
  FinishResult EndInTransaction(int status);
  // Finish's end once the Complete call answered `done` after `latency`
  // (the handle is already inactive: `guard` is the one it had).
  FinishResult EndCompletion(Guard& guard, Result<bool> done, Duration latency,
                             int status);
  void EndLease() {
    if (lease_) lease_->End();
  }
  // Guard::Claim: the claim `claimed` acquired for this handle.
  void Acquired(const ClaimResult& claimed) {
    token_ = claimed.token;
    takeover_ = claimed.takeover;
    locked_until_ = claimed.locked_until;
  }

  Guard* guard_ = nullptr;
  RecordId id_;
  Token token_;
  bool takeover_ = false;
  // The claim's lock end (lock_state without renewal).
  TimePoint locked_until_{};
  std::string instance_;
  enum class InTransaction { kNo, kCommitted, kClaimLost };
  InTransaction in_transaction_ = InTransaction::kNo;
  std::shared_ptr<const GuardOptions> options_;
  // When Begin started (the request-latency histogram, FinishEvent).
  std::chrono::steady_clock::time_point started_{};
  // For FinishEvent; copied only when the Guard has observers.
  std::string method_;
  std::string route_;
  std::shared_ptr<ClaimLease> lease_;
  // Set by StartFinish: the asynchronous completion Finish ends with.
  struct PendingCompletion;
  std::shared_ptr<PendingCompletion> pending_;
};
}  // namespace idem

#endif  // IDEM_CLAIM_HANDLE_H_
