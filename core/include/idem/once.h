// At-most-once execution for callers without HTTP: a job, a message
// consumer, a service-to-service call with a server-derived key.
//
//   auto result = idem::RunOnce(guard, tenant, message_id, "charge", payload,
//                               [&] { return ChargeCard(payload); });
//   if (!result) ...            // see the errors below
//   result->value;              // the stored result, fresh or replayed
//   result->replayed;           // true when an earlier run's result
//
// It is the Guard underneath, with the same claim/complete/release rules,
// lock timeout, ttl, waiting and store-error policy: `fn` runs only when the
// key is acquired (or, fail-open, when the store is down), its result is
// stored before RunOnce returns, and if `fn` throws the key is released and
// the exception propagates.
//
// Thread-safety: as Guard.

#ifndef IDEM_ONCE_H_
#define IDEM_ONCE_H_

#include <string>
#include <string_view>
#include <utility>

#include "idem/error.h"
#include "idem/guard.h"

namespace idem {

struct OnceResult {
  std::string value;
  bool replayed = false;
};

// Errors (never from `fn`, whose exceptions propagate):
//  - kInvalidArgument: the key is empty or too long, `input` is over
//    max_request_body, or the key was used before with another operation or
//    input (do not retry with this key);
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
      guard.BeginWithKey(scope, key, operation, input, std::move(route));
  while (d.action == Action::kWait) {
    guard.clock().SleepFor(d.retry_in);
    d = guard.Resume(std::move(d));
  }
  switch (d.action) {
    case Action::kExecute: {
      Response r;
      r.body = std::forward<Fn>(fn)();
      d.claim.Finish(r);
      return OnceResult{std::move(r.body), false};
    }
    case Action::kPassThrough:
      return OnceResult{std::forward<Fn>(fn)(), false};
    case Action::kRespond:
    case Action::kWait:
      break;
  }
  switch (d.outcome) {
    case Outcome::kReplayed:
      return OnceResult{std::move(d.response.body), true};
    case Outcome::kConflict:
      return MakeError(ErrorCode::kUnavailable,
                       "a run with this key is still in progress");
    case Outcome::kStoreFull:
      return MakeError(ErrorCode::kResourceExhausted,
                       "the idempotency store is full");
    case Outcome::kStoreError:
      return MakeError(ErrorCode::kUnavailable,
                       "the idempotency store is unavailable");
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

}  // namespace idem

#endif  // IDEM_ONCE_H_
