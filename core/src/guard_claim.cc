// The claim step of the decision procedure (SEMANTICS.md, steps 4 and 5):
// Guard::Claim asks the store for the key and turns its answer into a
// decision (execute, replay, mismatch, wait, or a problem for a store
// error), and Guard::Resume makes the next attempt of a waiting request.
// Split from guard.cc, which keeps the steps before the claim and the
// observers. Thread-safety: as Guard.

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "guard_trace.h"
#include "idem/guard.h"
#include "response_seal.h"
#include "timed_store_call.h"

namespace idem {
namespace {

using internal::Timed;

// Waiting for an in-progress request polls the store; back off from 10 ms to
// at most 250 ms so a long handler is not hammered with claims.
constexpr Duration kFirstPoll = std::chrono::milliseconds(10);
constexpr Duration kMaxPoll = std::chrono::milliseconds(250);

// The state a kWait or kCallStore decision carries: `owner` when the state
// is shared already (a Resume's), else a shared copy of the Begin call's
// own, with its instance copied (the request's path it viewed dies with the
// call). Only a request that waits pays for the allocation.
std::shared_ptr<detail::WaitState> Kept(
    detail::WaitState& state, std::shared_ptr<detail::WaitState> owner) {
  if (owner) return owner;
  auto kept = std::make_shared<detail::WaitState>(std::move(state));
  kept->kept_instance = std::string(kept->instance);
  kept->instance = kept->kept_instance;
  return kept;
}

}  // namespace

Decision Guard::Resume(Decision waiting) {
  if ((waiting.action != Action::kWait &&
       waiting.action != Action::kCallStore) ||
      !waiting.wait) {
    return waiting;
  }
  // Kept here so that the trace's views into it outlive Claim.
  const std::shared_ptr<detail::WaitState> state = std::move(waiting.wait);
  Trace trace;
  trace.started = state->started;
  trace.method = state->method;
  trace.route = state->route;
  trace.record_id = state->id;
  trace.store_latency = state->store_latency;
  Decision d;
  if (state->answer) {
    // StartResume's store call answered: its decision, no second call.
    Result<ClaimResult> answer = std::move(*state->answer);
    state->answer.reset();
    d = Claimed(std::move(answer), state->answer_now, *state, state, trace);
  } else {
    d = Claim(*state, state, trace);
  }
  Decided(d, trace);
  return d;
}

bool Guard::StartResume(Decision& waiting, std::function<void()> answered) {
  if ((waiting.action != Action::kWait &&
       waiting.action != Action::kCallStore) ||
      !waiting.wait || !store_async_) {
    return false;
  }
  detail::WaitState& state = *waiting.wait;
  const GuardOptions& opts = *state.options;
  state.answer_now = clock_->Now();
  const auto start = std::chrono::steady_clock::now();
  // The state is the caller's again only once `answered` has run: the store
  // writes the answer into it first.
  store_->ClaimAsync(
      state.id, state.fingerprint, state.answer_now, opts.ttl,
      opts.lock_timeout,
      [this, state = waiting.wait, start,
       answered = std::move(answered)](Result<ClaimResult> claimed) {
        internal::Observed(*metrics_, StoreOperation::kClaim,
                           state->store_latency, start);
        state->answer = std::move(claimed);
        answered();
      });
  return true;
}

void Guard::KeepTrace(detail::WaitState& state, const Trace& trace) const {
  // Only the first decision's views are the request's; a Resume's are
  // views of these copies.
  if (state.started == std::chrono::steady_clock::time_point()) {
    state.started = trace.started;
    if (!observers_.empty()) {
      state.method = trace.method;
      state.route = trace.route;
    }
  }
  state.store_latency = trace.store_latency;
}

Decision Guard::Claim(detail::WaitState& state,
                      std::shared_ptr<detail::WaitState> owner, Trace& trace,
                      bool may_block) {
  const GuardOptions& opts = *state.options;
  const TimePoint now = clock_->Now();
  if (!may_block && store_may_block_) {
    // Timed and counted only when the store answered: a nullopt is not a
    // store call, and the Claim that Resume makes is.
    const auto start = std::chrono::steady_clock::now();
    std::optional<Result<ClaimResult>> tried = store_->TryClaimWithoutBlocking(
        state.id, state.fingerprint, now, opts.ttl, opts.lock_timeout);
    if (!tried) {
      KeepTrace(state, trace);
      Decision d;
      d.action = Action::kCallStore;
      d.wait = Kept(state, std::move(owner));
      return d;
    }
    internal::Observed(*metrics_, StoreOperation::kClaim, trace.store_latency,
                       start);
    return Claimed(std::move(*tried), now, state, std::move(owner), trace);
  }
  auto claimed =
      Timed(*metrics_, StoreOperation::kClaim, trace.store_latency, [&] {
        return store_->Claim(state.id, state.fingerprint, now, opts.ttl,
                             opts.lock_timeout);
      });
  return Claimed(std::move(claimed), now, state, std::move(owner), trace);
}

Decision Guard::Claimed(Result<ClaimResult> claimed, TimePoint now,
                        detail::WaitState& state,
                        std::shared_ptr<detail::WaitState> owner,
                        Trace& trace) {
  const GuardOptions& opts = *state.options;

  // One record's problem, not the store's: only this key is refused, and
  // the full id lets an operator revoke the record, so each damaged record
  // is a kind of its own in the rate limit.
  const auto damaged = [&](const Error& error) {
    Log(LogLevel::kError,
        "damaged idempotency record " + state.id.ToHex() + " (" +
            error.ToString() +
            "); requests with its key get 500 until it is revoked "
            "(idemctl revoke --record-id)",
        "damaged record " + state.id.ToHex());
    return Problem(Outcome::kRecordDamaged, opts, state.instance);
  };
  if (!claimed) {
    const Error& error = claimed.error();
    switch (error.code()) {
      case ErrorCode::kResourceExhausted:
        Log(LogLevel::kWarning, "idempotency store full: " + error.message());
        return Problem(Outcome::kStoreFull, opts, state.instance);
      case ErrorCode::kDataLoss:
        return damaged(error);
      case ErrorCode::kUnavailable:
        // The one error that means "the store is unreachable": only a
        // fail-open route runs unprotected, and only fail-open routes skip
        // the store for the back-off.
        if (opts.on_store_error == StoreErrorPolicy::kFailOpen) {
          skip_store_until_.store(
              (now + opts.store_backoff).time_since_epoch().count(),
              std::memory_order_relaxed);
          Log(LogLevel::kError,
              "idempotency store failed (" + error.ToString() +
                  "); fail-open routes run unprotected for the store backoff");
          return PassThrough(Outcome::kFailOpen);
        }
        break;
      case ErrorCode::kInvalidArgument:
      case ErrorCode::kInternal:
      case ErrorCode::kAborted:  // No store returns it.
        // Not an outage: a bug or a store that cannot serve this call.
        // Failing open would switch protection off for a fault that
        // retrying does not cure, so every route answers 503.
        break;
    }
    Log(LogLevel::kError, "idempotency store failed: " + error.ToString());
    return Problem(Outcome::kStoreError, opts, state.instance);
  }

  switch (claimed->outcome) {
    case ClaimOutcome::kAcquired: {
      metrics_->Count(Outcome::kExecuted);
      if (claimed->takeover) {
        metrics_->Count(Outcome::kTakeover);
        Log(LogLevel::kInfo,
            "took over a request whose lock timed out, record " +
                state.id.ToHex());
      }
      Decision d;
      d.action = Action::kExecute;
      d.outcome = Outcome::kExecuted;
      d.claim.guard_ = this;
      d.claim.id_ = state.id;
      d.claim.Acquired(*claimed);
      // The fingerprint and claim time ride with the options: the stored
      // form needs them (response_seal.h).
      d.claim.options_ = internal::WithClaimContext(std::move(state.options),
                                                    state.fingerprint, now);
      d.claim.instance_ = std::string(state.instance);
      return d;
    }
    case ClaimOutcome::kMismatch:
      return Problem(Outcome::kMismatch, opts, state.instance);
    case ClaimOutcome::kCompleted: {
      // Opened (sealed), decompressed, the replay header added and the
      // route's on_replay run; a response that cannot be opened is a
      // damaged record, never a replay of its bytes nor a rerun.
      std::optional<std::string> hook_error;
      // Both arms lvalues: the stored response is not copied to pass it.
      static const Response kNoResponse;
      auto replay = internal::ToReplay(
          opts, *options_, state.id, state.fingerprint,
          claimed->response ? *claimed->response : kNoResponse, &hook_error);
      if (!replay) return damaged(replay.error());
      if (hook_error) {
        Log(LogLevel::kError,
            "on_replay threw (" + *hook_error +
                "); the replay was sent without its changes, record " +
                state.id.ToHex(),
            "on_replay threw");
      }
      return Respond(Outcome::kReplayed, std::move(*replay));
    }
    case ClaimOutcome::kInProgress:
      break;
  }

  if (now < state.deadline) {
    Duration delay = kFirstPoll * (1 << std::min(state.attempt, 5));
    delay = std::min({delay, kMaxPoll, state.deadline - now});
    // The request's own views die with the Begin call: keep copies for the
    // observers of the decision Resume will make.
    KeepTrace(state, trace);
    ++state.attempt;
    Decision d;
    d.action = Action::kWait;
    d.retry_in = delay;
    d.wait = Kept(state, std::move(owner));
    return d;
  }
  return Problem(Outcome::kConflict, opts, state.instance);
}

}  // namespace idem
