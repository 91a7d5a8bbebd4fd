#include "idem/guard.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fingerprint_fields.h"
#include "idem/fingerprint.h"
#include "idem/idempotency_key.h"
#include "idem/record_id.h"
#include "response_seal.h"
#include "timed_store_call.h"

namespace idem {
namespace detail {

// A request between claim attempts (only kept across a lock_wait).
struct WaitState {
  RecordId id;
  Fingerprint fingerprint;
  std::shared_ptr<const GuardOptions> options;
  std::string instance;
  TimePoint deadline;
  int attempt = 0;
  // The Trace of the decision so far (Guard::Resume continues it); method
  // and route are copied only when the Guard has observers.
  std::chrono::steady_clock::time_point started;
  Duration store_latency{};
  std::string method;
  std::string route;
};

}  // namespace detail

// Latencies are measured on the steady clock, never on the Guard's Clock:
// they are durations on this host (a wall-clock step must not make one
// negative), while the Guard's Clock decides expiries shared with others.
//
// The metrics are not an observer: they are counted inline with relaxed
// atomics, so a Guard without observers pays no virtual call and builds no
// event; the observers get the same moments (Decided, ClaimEnded).
struct Guard::Trace {
  std::chrono::steady_clock::time_point started;
  std::string_view method;
  std::string_view route;
  std::optional<RecordId> record_id;
  Duration store_latency{};
};

namespace {

using SteadyClock = std::chrono::steady_clock;
using internal::Timed;

// Waiting for an in-progress request polls the store; back off from 10 ms to
// at most 250 ms so a long handler is not hammered with claims.
constexpr Duration kFirstPoll = std::chrono::milliseconds(10);
constexpr Duration kMaxPoll = std::chrono::milliseconds(250);

// The method BeginWithKey's requests have, in fingerprints, operation names
// and observer events.
constexpr std::string_view kCallMethod = "CALL";

std::string_view PathOf(std::string_view target) {
  return target.substr(0, target.find('?'));
}

// The deleter of the options MakeRouteOptions returns, and their mark: its
// type, found with std::get_deleter, says they were validated, and since
// they are const they stay valid, so Begin need not validate them again. The
// pointer it holds tells them apart from another object that an aliasing
// shared_ptr might share the control block with.
struct ValidatedRoute {
  const GuardOptions* options;
  void operator()(const GuardOptions* p) const { delete p; }
};

bool IsValidatedRoute(const std::shared_ptr<const GuardOptions>& route) {
  const auto* mark = std::get_deleter<ValidatedRoute>(route);
  return mark != nullptr && mark->options == route.get();
}

}  // namespace

// ---------------------------------------------------------------------------
// Guard

Result<std::unique_ptr<Guard>> Guard::Create(GuardSetup setup) {
  if (!setup.store) {
    return MakeError(ErrorCode::kInvalidArgument, "guard needs a store");
  }
  IDEM_RETURN_IF_ERROR(setup.options.Validate());
  return std::unique_ptr<Guard>(new Guard(std::move(setup)));
}

Guard::Guard(GuardSetup setup)
    : store_(std::move(setup.store)),
      options_(std::make_shared<const GuardOptions>(std::move(setup.options))),
      clock_(setup.clock ? std::move(setup.clock) : SystemClock::Instance()),
      metrics_(setup.metrics ? std::move(setup.metrics)
                             : std::make_shared<Metrics>()),
      observers_(std::move(setup.observers)),
      switch_log_(std::move(setup.log)),
      // A failing store under load would otherwise log one line per
      // request (hundreds of MB a minute).
      log_(switch_log_ && setup.log_repeat_interval > Duration::zero()
               ? std::make_unique<LogRateLimiter>(switch_log_, clock_,
                                                  setup.log_repeat_interval)
               : nullptr) {
  // Started off, the operator is told as when it is switched off.
  SetEnabled(setup.enabled);
}

void Guard::Log(LogLevel level, const std::string& message,
                std::string_view kind) const {
  if (log_) {
    log_->Log(level, message, kind);
  } else if (switch_log_) {
    switch_log_(level, message);
  }
}

void Guard::Decided(Decision& d, const Trace& trace) {
  if (d.action == Action::kWait) return;
  if (d.action == Action::kExecute) {
    // Timed when the claim ends (ClaimEnded): an executed request's latency
    // includes its handler and Finish.
    d.claim.started_ = trace.started;
    if (observers_.empty()) return;
    d.claim.method_ = trace.method;
    d.claim.route_ = trace.route;
  }
  const Duration elapsed =
      std::chrono::duration_cast<Duration>(SteadyClock::now() - trace.started);
  if (d.action != Action::kExecute)
    metrics_->ObserveRequest(d.outcome, elapsed);
  if (observers_.empty()) return;
  DecisionEvent event;
  event.outcome = d.outcome;
  event.method = trace.method;
  event.route = trace.route;
  event.record_id = trace.record_id;
  event.store_latency = trace.store_latency;
  event.elapsed = elapsed;
  for (const auto& observer : observers_) observer->OnDecision(event);
}

void Guard::ClaimEnded(const ClaimHandle& claim, FinishResult result,
                       int status, Duration store_latency) {
  const Duration elapsed =
      std::chrono::duration_cast<Duration>(SteadyClock::now() - claim.started_);
  metrics_->ObserveRequest(Outcome::kExecuted, elapsed);
  if (observers_.empty()) return;
  FinishEvent event;
  event.record_id = claim.id_;
  event.result = result;
  event.status = status;
  event.method = claim.method_;
  event.route = claim.route_;
  event.store_latency = store_latency;
  event.elapsed = elapsed;
  for (const auto& observer : observers_) observer->OnFinish(event);
}

void Guard::NotifyRenewal(const RenewalEvent& event) {
  for (const auto& observer : observers_) observer->OnRenewal(event);
}

bool Guard::InFailOpenBackoff(const GuardOptions& route, TimePoint now) const {
  // A fail-closed route always asks the store: another route's back-off
  // must not switch its protection off.
  return route.on_store_error == StoreErrorPolicy::kFailOpen &&
         now.time_since_epoch().count() <
             skip_store_until_.load(std::memory_order_relaxed);
}

std::optional<Decision> Guard::RefuseInvalidRoute(
    const std::shared_ptr<const GuardOptions>& route,
    std::string_view instance) {
  if (route == options_ || IsValidatedRoute(route)) return std::nullopt;
  auto valid = route->Validate();
  if (valid) return std::nullopt;
  // A configuration bug, not a store outage: no store call, no back-off, and
  // the problem is built from the guard's own (valid) options.
  Log(LogLevel::kError,
      "request refused: the route's options are invalid (" +
          valid.error().message() +
          "); register routes with Guard::MakeRouteOptions to catch this at "
          "start-up");
  return Problem(Outcome::kRouteInvalid, *options_, instance);
}

Result<std::shared_ptr<const GuardOptions>> Guard::MakeRouteOptions(
    GuardOptions options) {
  IDEM_RETURN_IF_ERROR(options.Validate());
  const GuardOptions* validated = new GuardOptions(std::move(options));
  return std::shared_ptr<const GuardOptions>(validated,
                                             ValidatedRoute{validated});
}

Decision Guard::Begin(const RequestView& request,
                      std::shared_ptr<const GuardOptions> route) {
  Trace trace;
  trace.started = SteadyClock::now();
  trace.method = request.method;
  trace.route = request.route.empty() ? PathOf(request.target) : request.route;
  Decision d = BeginSteps(request, std::move(route), trace);
  Decided(d, trace);
  return d;
}

Decision Guard::BeginSteps(const RequestView& request,
                           std::shared_ptr<const GuardOptions> route,
                           Trace& trace) {
  // Step 0: switched off, nothing is asked of the route or the store.
  if (!enabled()) return PassThrough(Outcome::kUnprotected);
  const std::string_view instance = PathOf(request.target);
  if (!route) {
    route = options_;
  } else if (auto refused = RefuseInvalidRoute(route, instance)) {
    return std::move(*refused);
  }
  const GuardOptions& opts = *route;

  // Steps 1 and 2: the key.
  std::string_view values[2];
  std::size_t count = 0;
  for (const auto& [name, value] : request.headers) {
    if (HeaderNameEquals(name, kIdempotencyKeyHeader)) {
      if (count < 2) values[count] = value;
      ++count;
    }
  }
  if (count == 0) {
    if (!opts.key_required) return PassThrough(Outcome::kUnprotected);
    return Problem(Outcome::kKeyMissing, opts, instance);
  }
  // Step 1c: the anonymous policy is about requests that carry a key.
  if (!request.scope && opts.anonymous != AnonymousPolicy::kShared) {
    if (opts.anonymous == AnonymousPolicy::kBypass) {
      return PassThrough(Outcome::kAnonymousBypassed);
    }
    return Problem(Outcome::kAnonymousRejected, opts, instance);
  }
  auto key =
      ParseIdempotencyKeyHeaders(std::span<const std::string_view>(
                                     values, std::min<std::size_t>(count, 2)),
                                 opts.max_key_length);
  if (!key) {
    return Problem(Outcome::kKeyInvalid, opts, instance,
                   std::string(KeyErrorDetail(key.error())));
  }

  // Step 3: the body must be bounded before it is hashed.
  if (request.body_too_large || request.body.size() > opts.max_request_body) {
    if (opts.oversize_request == OversizePolicy::kBypass) {
      return PassThrough(Outcome::kTooLarge);
    }
    return Problem(Outcome::kTooLarge, opts, instance,
                   "The request body is larger than the " +
                       std::to_string(opts.max_request_body) +
                       " bytes this endpoint accepts for idempotent requests.");
  }

  const TimePoint now = clock_->Now();
  if (InFailOpenBackoff(opts, now)) return PassThrough(Outcome::kFailOpen);

  // Only the configured headers take part, in the configured order; repeated
  // headers are joined as HTTP allows.
  std::vector<std::pair<std::string_view, std::string_view>> fp_headers;
  std::vector<std::string> joined;
  if (!opts.fingerprint_headers.empty()) {
    joined.resize(opts.fingerprint_headers.size());
    for (std::size_t i = 0; i < opts.fingerprint_headers.size(); ++i) {
      for (const auto& [name, value] : request.headers) {
        if (!HeaderNameEquals(name, opts.fingerprint_headers[i])) continue;
        if (!joined[i].empty()) joined[i] += ", ";
        joined[i] += value;
      }
      fp_headers.emplace_back(opts.fingerprint_headers[i], joined[i]);
    }
  }
  FingerprintInput input;
  input.method = request.method;
  input.target = request.target;
  input.headers = fp_headers;
  input.body = request.body;
  input.body_mode = opts.fingerprint_body;
  std::string fields;
  internal::ApplyFingerprintFields(opts.fingerprint_fields, input, fields);

  auto state = std::make_shared<detail::WaitState>();
  const std::string_view scope = request.scope.value_or(std::string_view());
  // The operation is the route pattern (trace.route), not the path: see
  // GuardOptions::key_per_operation.
  state->id = opts.key_per_operation
                  ? MakeRecordId(
                        scope, OperationName(request.method, trace.route), *key)
                  : MakeRecordId(scope, *key);
  trace.record_id = state->id;
  state->fingerprint = ComputeFingerprint(input);
  state->options = std::move(route);
  state->instance = std::string(instance);
  state->deadline = now + opts.lock_wait;
  return Claim(std::move(state), trace);
}

Decision Guard::BeginWithKey(std::string_view scope, std::string_view key,
                             std::string_view operation, std::string_view input,
                             std::shared_ptr<const GuardOptions> route) {
  Trace trace;
  trace.started = SteadyClock::now();
  trace.method = kCallMethod;
  trace.route = operation;
  Decision d =
      BeginWithKeySteps(scope, key, operation, input, std::move(route), trace);
  Decided(d, trace);
  return d;
}

Decision Guard::BeginWithKeySteps(std::string_view scope, std::string_view key,
                                  std::string_view operation,
                                  std::string_view input,
                                  std::shared_ptr<const GuardOptions> route,
                                  Trace& trace) {
  if (!enabled()) return PassThrough(Outcome::kUnprotected);
  if (!route) {
    route = options_;
  } else if (auto refused = RefuseInvalidRoute(route, operation)) {
    return std::move(*refused);
  }
  const GuardOptions& opts = *route;
  if (key.empty() || key.size() > opts.max_key_length) {
    return Problem(Outcome::kKeyInvalid, opts, operation,
                   key.empty()
                       ? "The idempotency key is empty."
                       : "The idempotency key is longer than " +
                             std::to_string(opts.max_key_length) + " bytes.");
  }
  if (input.size() > opts.max_request_body) {
    return Problem(Outcome::kTooLarge, opts, operation,
                   "The input is larger than " +
                       std::to_string(opts.max_request_body) + " bytes.");
  }
  const TimePoint now = clock_->Now();
  if (InFailOpenBackoff(opts, now)) return PassThrough(Outcome::kFailOpen);
  FingerprintInput fp;
  fp.method = kCallMethod;
  fp.target = operation;
  fp.body = input;
  fp.body_mode = opts.fingerprint_body;
  std::string fields;
  internal::ApplyFingerprintFields(opts.fingerprint_fields, fp, fields);
  auto state = std::make_shared<detail::WaitState>();
  // "CALL <operation>", so that idemctl --method CALL --path <operation>
  // names the record.
  state->id =
      opts.key_per_operation
          ? MakeRecordId(scope, OperationName(kCallMethod, operation), key)
          : MakeRecordId(scope, key);
  trace.record_id = state->id;
  state->fingerprint = ComputeFingerprint(fp);
  state->options = std::move(route);
  state->instance = std::string(operation);
  state->deadline = now + opts.lock_wait;
  return Claim(std::move(state), trace);
}

Decision Guard::Resume(Decision waiting) {
  if (waiting.action != Action::kWait || !waiting.wait) return waiting;
  // Kept here so that the trace's views into it outlive Claim.
  const std::shared_ptr<detail::WaitState> state = std::move(waiting.wait);
  Trace trace;
  trace.started = state->started;
  trace.method = state->method;
  trace.route = state->route;
  trace.record_id = state->id;
  trace.store_latency = state->store_latency;
  Decision d = Claim(state, trace);
  Decided(d, trace);
  return d;
}

Decision Guard::Claim(std::shared_ptr<detail::WaitState> state, Trace& trace) {
  const GuardOptions& opts = *state->options;
  const TimePoint now = clock_->Now();
  auto claimed =
      Timed(*metrics_, StoreOperation::kClaim, trace.store_latency, [&] {
        return store_->Claim(state->id, state->fingerprint, now, opts.ttl,
                             opts.lock_timeout);
      });

  // One record's problem, not the store's: only this key is refused, and
  // the full id lets an operator revoke the record, so each damaged record
  // is a kind of its own in the rate limit.
  const auto damaged = [&](const Error& error) {
    Log(LogLevel::kError,
        "damaged idempotency record " + state->id.ToHex() + " (" +
            error.ToString() +
            "); requests with its key get 500 until it is revoked "
            "(idemctl revoke --record-id)",
        "damaged record " + state->id.ToHex());
    return Problem(Outcome::kRecordDamaged, opts, state->instance);
  };
  if (!claimed) {
    const Error& error = claimed.error();
    switch (error.code()) {
      case ErrorCode::kResourceExhausted:
        Log(LogLevel::kWarning, "idempotency store full: " + error.message());
        return Problem(Outcome::kStoreFull, opts, state->instance);
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
    return Problem(Outcome::kStoreError, opts, state->instance);
  }

  switch (claimed->outcome) {
    case ClaimOutcome::kAcquired: {
      metrics_->Count(Outcome::kExecuted);
      if (claimed->takeover) {
        metrics_->Count(Outcome::kTakeover);
        Log(LogLevel::kInfo,
            "took over a request whose lock timed out, record " +
                state->id.ToHex());
      }
      Decision d;
      d.action = Action::kExecute;
      d.outcome = Outcome::kExecuted;
      d.claim.guard_ = this;
      d.claim.id_ = state->id;
      d.claim.Acquired(*claimed);
      // The fingerprint and claim time ride with the options: the stored
      // form needs them (response_seal.h).
      d.claim.options_ = internal::WithClaimContext(std::move(state->options),
                                                    state->fingerprint, now);
      d.claim.instance_ = std::move(state->instance);
      return d;
    }
    case ClaimOutcome::kMismatch:
      return Problem(Outcome::kMismatch, opts, state->instance);
    case ClaimOutcome::kCompleted: {
      // Opened (sealed), decompressed, the replay header added and the
      // route's on_replay run; a response that cannot be opened is a
      // damaged record, never a replay of its bytes nor a rerun.
      std::optional<std::string> hook_error;
      auto replay = internal::ToReplay(
          opts, *options_, state->id, state->fingerprint,
          claimed->response ? *claimed->response : Response(), &hook_error);
      if (!replay) return damaged(replay.error());
      if (hook_error) {
        Log(LogLevel::kError,
            "on_replay threw (" + *hook_error +
                "); the replay was sent without its changes, record " +
                state->id.ToHex(),
            "on_replay threw");
      }
      return Respond(Outcome::kReplayed, std::move(*replay));
    }
    case ClaimOutcome::kInProgress:
      break;
  }

  if (now < state->deadline) {
    Duration delay = kFirstPoll * (1 << std::min(state->attempt, 5));
    delay = std::min({delay, kMaxPoll, state->deadline - now});
    // The request's own views die with the Begin call: keep copies for the
    // observers of the decision Resume will make.
    if (state->attempt == 0) {
      state->started = trace.started;
      if (!observers_.empty()) {
        state->method = trace.method;
        state->route = trace.route;
      }
    }
    state->store_latency = trace.store_latency;
    ++state->attempt;
    Decision d;
    d.action = Action::kWait;
    d.retry_in = delay;
    d.wait = std::move(state);
    return d;
  }
  return Problem(Outcome::kConflict, opts, state->instance);
}

}  // namespace idem
