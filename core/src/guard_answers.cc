// The Guard's answers that end a request or a claim without the decision
// procedure: the problem responses (one row per outcome), a pass-through, the
// release of a key, and what a completion that lost its claim logs. Split
// from guard.cc, which keeps the decision steps. Thread-safety: as Guard.

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "idem/guard.h"
#include "idem/problem.h"
#include "timed_store_call.h"

namespace idem {
namespace {

using internal::Timed;

// Every answer the Guard gives instead of the handler's, one row per
// outcome (SEMANTICS.md, "What a protected request gets"): status, code,
// whether a retry is invited (Retry-After), and the detail unless the call
// gives one that names a limit.
struct ProblemRow {
  Outcome outcome;
  int status;
  std::string_view code;
  bool retry_after;
  std::string_view detail;
};

constexpr ProblemRow kProblems[] = {
    {Outcome::kKeyMissing, 400, problem_code::kKeyMissing, false,
     "This endpoint requires an Idempotency-Key header: send a unique value "
     "(a UUID, say) and send the same value again when you retry."},
    {Outcome::kAnonymousRejected, 401, problem_code::kAuthenticationRequired,
     false,
     "Requests with an Idempotency-Key to this endpoint must be "
     "authenticated."},
    // Detail: the key error (KeyErrorDetail) or the BeginWithKey limit.
    {Outcome::kKeyInvalid, 400, problem_code::kKeyInvalid, false, ""},
    // Detail: names max_request_body.
    {Outcome::kTooLarge, 413, problem_code::kRequestTooLarge, false, ""},
    {Outcome::kBodyNotJson, 400, problem_code::kBodyNotJson, false,
     "This endpoint identifies a request by members of its JSON body, and "
     "this body is not JSON; send the request as a JSON document."},
    {Outcome::kMismatch, 422, problem_code::kKeyReused, false,
     "This Idempotency-Key was already used for a different request; send a "
     "new key for a new request."},
    {Outcome::kConflict, 409, problem_code::kInProgress, true,
     "A request with this Idempotency-Key is still being processed; retry "
     "after it has finished."},
    {Outcome::kStoreError, 503, problem_code::kStoreUnavailable, true,
     "The server cannot check this request's Idempotency-Key right now; "
     "retry later with the same key."},
    {Outcome::kStoreFull, 503, problem_code::kStoreFull, true,
     "The server cannot accept more idempotent requests right now; retry "
     "later."},
    {Outcome::kRecordDamaged, 500, problem_code::kRecordDamaged, false,
     "The stored record of this Idempotency-Key is damaged; the request was "
     "not run. Contact the operator, or send a new key if the request must "
     "run now."},
    {Outcome::kRouteInvalid, 500, problem_code::kRouteInvalid, false,
     "The server's idempotency settings for this endpoint are invalid; the "
     "request was not run."},
};

const ProblemRow& ProblemFor(Outcome outcome) {
  for (const ProblemRow& row : kProblems) {
    if (row.outcome == outcome) return row;
  }
  // Only the outcomes above are answered with a problem; reaching this is a
  // bug in this file, answered as a store error rather than crashing.
  return ProblemFor(Outcome::kStoreError);
}

}  // namespace

Decision Guard::Respond(Outcome outcome, Response response) {
  metrics_->Count(outcome);
  Decision d;
  d.action = Action::kRespond;
  d.outcome = outcome;
  d.response = std::move(response);
  return d;
}

Decision Guard::Problem(Outcome outcome, const GuardOptions& options,
                        std::string_view instance, std::string detail) {
  const ProblemRow& row = ProblemFor(outcome);
  idem::Problem p;
  p.status = row.status;
  p.code = row.code;
  p.detail = detail.empty() ? std::string(row.detail) : std::move(detail);
  p.instance = instance;
  p.type = options.problem_type;
  if (row.retry_after) p.retry_after = options.retry_after;
  return Respond(outcome, MakeProblemResponse(p));
}

Decision Guard::PassThrough(Outcome outcome) {
  metrics_->Count(outcome);
  Decision d;
  d.action = Action::kPassThrough;
  d.outcome = outcome;
  return d;
}

Duration Guard::ReleaseClaim(const ClaimHandle& claim, Outcome outcome) {
  metrics_->Count(outcome);
  Duration latency{};
  auto released = Timed(*metrics_, StoreOperation::kRelease, latency, [&] {
    return store_->Release(claim.id_, claim.token_);
  });
  if (!released) {
    metrics_->Count(CountedEvent::kReleaseFailed);
    Log(LogLevel::kError,
        "releasing a key failed (" + released.error().ToString() +
            "); it stays locked until its lock timeout, record " +
            claim.id_.ToHex());
  }
  return latency;
}

std::string Guard::ClaimLostReason(const ClaimHandle& claim) {
  // The store's Complete (or the completion in the caller's transaction)
  // only says "not held by this token". Whether the key was taken over or
  // its record deleted (idemctl revoke, an eviction) is what the operator
  // needs to know, and one read of the record tells them apart on every
  // store: this path is rare (a lost claim), so the extra call is cheap.
  auto record = store_->Inspect(claim.id_, clock_->Now());
  if (!record) {
    return "the claim was lost: taken over or revoked (the store could not "
           "say which: " +
           record.error().ToString() + ")";
  }
  if (!record->has_value()) {
    return "the key's record was deleted while the handler ran (revoked, "
           "e.g. with idemctl revoke, or evicted by the store); a retry runs "
           "the handler again";
  }
  if ((*record)->HeldBy(claim.token_)) {
    // Not lost after all (a store that answered false for another reason):
    // say what the store said, not a guess.
    return "the store refused the completion although the claim still holds "
           "the record";
  }
  return "the lock timed out and another request took the key over (or the "
         "record was revoked and the key claimed again)";
}

}  // namespace idem
