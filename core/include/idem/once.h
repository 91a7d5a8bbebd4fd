// At-most-once execution for callers without HTTP: a job, a message
// consumer, a service-to-service call with a server-derived key.
//
//   auto result = idem::RunOnce(guard, tenant, message_id, "charge", payload,
//                               [&] { return ChargeCard(payload); });
//   if (!result) ...            // see the errors below
//   result->value;              // fn's result, fresh or replayed
//   result->replayed;           // true when an earlier run's result
//   result->stored();           // false: a repeat with this key runs fn again
//
// It is the Guard underneath, with the same claim/complete/release rules,
// lock timeout, lock renewal, ttl, waiting and store-error policy: `fn` runs
// only when the key is acquired (or, on a fail-open route, when the store is
// unreachable), its result is stored before RunOnce returns, and if `fn` throws
// the key is released and the exception propagates.
//
// `fn` may take the run's ClaimHandle& (below); sql::RunOnceInTransaction
// (sql_once.h) stores the result in the work's own SQL transaction, exactly
// once.
//
// At most once per key holds while results are stored. When one is not (it
// is over max_stored_response, storing it failed, the lock had been taken
// over, the store was skipped fail-open, or the route does not store status
// 200), RunOnce still returns fn's result but says so in `storage`: a repeat
// with the same key will run fn again.
//
// Thread-safety: as Guard.

#ifndef IDEM_ONCE_H_
#define IDEM_ONCE_H_

#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "idem/error.h"
#include "idem/guard.h"

namespace idem {

// What became of fn's result; whether a repeat with the key replays it.
enum class OnceStorage {
  kStored,    // fn ran; its result is stored, repeats replay it.
  kReplayed,  // An earlier run's stored result; fn did not run.
  // The rest: fn ran and its result is not stored.
  kTooLarge,         // Over max_stored_response; the key was released, so a
                     // repeat runs fn again. Warning logged.
  kStatusNotStored,  // The route's stored_statuses exclude 200; released.
  kStaleComplete,    // fn outlived lock_timeout (unrenewed, or a renewal
                     // found the claim lost) and another run took the key
                     // over; repeats replay that run's result. Warning logged.
  kStoreFailed,      // Storing failed; repeats get kUnavailable until
                     // lock_timeout, then run fn again. Error logged.
  kFailOpen,         // The store was unreachable and the route fails open: fn
                     // ran unprotected; repeats run fn again.
  kUnprotected,      // The Guard is switched off (Guard::SetEnabled): fn ran
                     // unprotected; repeats run fn again.
};

struct OnceResult {
  std::string value;
  bool replayed = false;
  OnceStorage storage = OnceStorage::kStored;
  // True when a repeat with this key gets `value` back without running fn.
  bool stored() const {
    return storage == OnceStorage::kStored || storage == OnceStorage::kReplayed;
  }
};

// The OnceStorage of a run that Finish ended with `finish`.
inline OnceStorage OnceStorageOf(FinishResult finish) {
  switch (finish) {
    case FinishResult::kStored:
      return OnceStorage::kStored;
    case FinishResult::kReleased:
      return OnceStorage::kStatusNotStored;
    case FinishResult::kNotStored:
      return OnceStorage::kTooLarge;
    case FinishResult::kStaleComplete:
      return OnceStorage::kStaleComplete;
    case FinishResult::kStoreFailed:
    case FinishResult::kInactive:
      break;
  }
  return OnceStorage::kStoreFailed;
}

namespace detail {

// BeginWithKey, then Resume after each retry_in (sleeping on the guard's
// clock) until the wait ends: never returns kWait.
inline Decision DecideOnce(Guard& guard, std::string_view scope,
                           std::string_view key, std::string_view operation,
                           std::string_view input,
                           std::shared_ptr<const GuardOptions> route) {
  Decision d =
      guard.BeginWithKey(scope, key, operation, input, std::move(route));
  while (d.action == Action::kWait) {
    guard.clock().SleepFor(d.retry_in);
    d = guard.Resume(std::move(d));
  }
  return d;
}

// What RunOnce returns for a kRespond decision: the replay, or the error
// its outcome names.
inline Result<OnceResult> AnswerOnce(Decision& d) {
  switch (d.outcome) {
    case Outcome::kReplayed:
      return OnceResult{std::move(d.response.body), true,
                        OnceStorage::kReplayed};
    case Outcome::kConflict:
      return MakeError(ErrorCode::kUnavailable,
                       "a run with this key is still in progress");
    case Outcome::kStoreFull:
      return MakeError(ErrorCode::kResourceExhausted,
                       "the idempotency store is full");
    case Outcome::kStoreError:
      return MakeError(ErrorCode::kUnavailable,
                       "the idempotency store is unavailable");
    case Outcome::kRecordDamaged:
      return MakeError(ErrorCode::kDataLoss,
                       "the key's stored record is damaged");
    case Outcome::kMismatch:
      return MakeError(ErrorCode::kInvalidArgument,
                       "the key was already used with another operation or "
                       "input");
    default:
      return MakeError(
          ErrorCode::kInvalidArgument,
          "rejected (" + std::string(OutcomeName(d.outcome)) + ")");
  }
}

// BeginWithKey passes through only fail-open or switched off.
inline OnceStorage PassThroughStorage(const Decision& d) {
  return d.outcome == Outcome::kUnprotected ? OnceStorage::kUnprotected
                                            : OnceStorage::kFailOpen;
}

// Calls `fn` with `claim` when it takes a ClaimHandle&, else with nothing.
template <typename Fn>
decltype(auto) CallOnce(Fn& fn, ClaimHandle& claim) {
  if constexpr (std::is_invocable_v<Fn&, ClaimHandle&>) {
    return fn(claim);
  } else {
    return fn();
  }
}

}  // namespace detail

// `fn` returns the std::string to store, and takes nothing or the
// ClaimHandle& of the run (inactive when it runs unprotected: fail-open or
// switched off), e.g. to complete the record in its own transaction
// (idem/sql_transaction.h; or use sql::RunOnceInTransaction, sql_once.h).
//
// Errors (never from `fn`, whose exceptions propagate):
//  - kInvalidArgument: the key is empty or too long, `input` is over
//    max_request_body, the key was used before with another operation or
//    input (do not retry with this key), or the route options are invalid;
//  - kDataLoss: the key's stored record is damaged (logged with its record
//    id; an operator revokes it);
//  - kUnavailable: another run with this key is still in progress after
//    lock_wait, or the store failed and the policy is fail-closed (retry
//    later with the same key);
//  - kResourceExhausted: the store is full.
template <typename Fn>
Result<OnceResult> RunOnce(
    Guard& guard, std::string_view scope, std::string_view key,
    std::string_view operation, std::string_view input, Fn&& fn,
    std::shared_ptr<const GuardOptions> route = nullptr) {
  Decision d =
      detail::DecideOnce(guard, scope, key, operation, input, std::move(route));
  switch (d.action) {
    case Action::kExecute: {
      Response r;
      {
        // With the route's lock_renewal, the claim is renewed while fn runs.
        detail::RenewWhileRunning renewing(guard, d.claim);
        r.body = detail::CallOnce(fn, d.claim);
      }
      const FinishResult finish = d.claim.Finish(r);
      return OnceResult{std::move(r.body), false, OnceStorageOf(finish)};
    }
    case Action::kPassThrough: {
      ClaimHandle unprotected;
      return OnceResult{detail::CallOnce(fn, unprotected), false,
                        detail::PassThroughStorage(d)};
    }
    case Action::kRespond:
    case Action::kWait:
    case Action::kCallStore:  // Begin never returns it.
      break;
  }
  return detail::AnswerOnce(d);
}

}  // namespace idem

#endif  // IDEM_ONCE_H_
