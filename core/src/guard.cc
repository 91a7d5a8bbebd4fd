// The Guard's decision procedure up to the claim (SEMANTICS.md, steps 0 to
// 3: the switch, the route, the key, the body limit, the fingerprint), its
// construction, and what the metrics and observers get of each decision.
// The claim itself and its retries are in guard_claim.cc, the answers
// without a handler in guard_answers.cc. Thread-safety: as Guard.

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
#include "guard_trace.h"
#include "idem/fingerprint.h"
#include "idem/idempotency_key.h"
#include "idem/record_id.h"
#include "idempotency_key_view.h"

namespace idem {
namespace {

using SteadyClock = std::chrono::steady_clock;

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
  const StoreInfo info = store_->Info();
  store_may_block_ = info.calls_may_block;
  store_async_ = info.async_calls;
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
  if (d.action == Action::kWait || d.action == Action::kCallStore) return;
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
  Decision d = BeginSteps(request, std::move(route), trace, true);
  Decided(d, trace);
  return d;
}

Decision Guard::BeginWithoutBlocking(
    const RequestView& request, std::shared_ptr<const GuardOptions> route) {
  Trace trace;
  Decision d = BeginSteps(request, std::move(route), trace, false);
  Decided(d, trace);
  return d;
}

Decision Guard::BeginSteps(const RequestView& request,
                           std::shared_ptr<const GuardOptions> route,
                           Trace& trace, bool may_block) {
  trace.started = SteadyClock::now();
  trace.method = request.method;
  trace.route = request.route.empty() ? PathOf(request.target) : request.route;
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
  // A view (of the header, or of `unescaped`): hashed into the record id
  // below, never kept.
  std::string unescaped;
  auto key = internal::ParseIdempotencyKeyView(
      std::span<const std::string_view>(values,
                                        std::min<std::size_t>(count, 2)),
      opts.max_key_length, unescaped);
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

  // Step 3b: a route that names the JSON members identifying a request
  // cannot identify one without them (GuardOptions::fingerprint_fields).
  FingerprintInput input;
  input.method = request.method;
  input.target = request.target;
  input.body = request.body;
  input.body_mode = opts.fingerprint_body;
  std::string fields;
  if (!internal::ApplyFingerprintFields(opts.fingerprint_fields, input,
                                        fields)) {
    return Problem(Outcome::kBodyNotJson, opts, instance);
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
  input.headers = fp_headers;

  detail::WaitState state;
  const std::string_view scope = request.scope.value_or(std::string_view());
  // The operation is the route pattern (trace.route), not the path: see
  // GuardOptions::key_per_operation.
  state.id = opts.key_per_operation
                 ? MakeRecordId(
                       scope, OperationName(request.method, trace.route), *key)
                 : MakeRecordId(scope, *key);
  trace.record_id = state.id;
  state.fingerprint = ComputeFingerprint(input);
  state.options = std::move(route);
  state.instance = instance;
  state.deadline = now + opts.lock_wait;
  return Claim(state, nullptr, trace, may_block);
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
  FingerprintInput fp;
  fp.method = kCallMethod;
  fp.target = operation;
  fp.body = input;
  fp.body_mode = opts.fingerprint_body;
  std::string fields;
  if (!internal::ApplyFingerprintFields(opts.fingerprint_fields, fp, fields)) {
    return Problem(Outcome::kBodyNotJson, opts, operation,
                   "This operation's input is identified by JSON members "
                   "and must be a JSON document.");
  }
  const TimePoint now = clock_->Now();
  if (InFailOpenBackoff(opts, now)) return PassThrough(Outcome::kFailOpen);
  detail::WaitState state;
  // "CALL <operation>", so that idemctl --method CALL --path <operation>
  // names the record.
  state.id =
      opts.key_per_operation
          ? MakeRecordId(scope, OperationName(kCallMethod, operation), key)
          : MakeRecordId(scope, key);
  trace.record_id = state.id;
  state.fingerprint = ComputeFingerprint(fp);
  state.options = std::move(route);
  state.instance = operation;
  state.deadline = now + opts.lock_wait;
  return Claim(state, nullptr, trace);
}

}  // namespace idem
