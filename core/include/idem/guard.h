// The Guard: the decision procedure of SEMANTICS.md, "What a protected
// request gets" and "What happens to the handler's response", for any HTTP
// framework and any Store.
//
// A request goes through at most three steps, which an async adapter can run
// on the threads it chooses (the store calls inside Begin, Resume and
// ClaimHandle::Finish may block on a durable or remote store):
//
//   Decision d = guard.Begin(request);          // parse, fingerprint, claim
//   while (d.action == Action::kWait)           // only with lock_wait > 0
//     d = guard.Resume(std::move(d));           //   after d.retry_in
//   switch (d.action) {
//     case Action::kRespond:     send d.response (a problem or a replay)
//     case Action::kPassThrough: run the handler unprotected
//     case Action::kExecute:     run the handler, d.claim.Finish(response),
//                                then send the response
//   }
//
// Guard::Run does all of that for a synchronous handler. The response is
// stored (Finish) before it is sent, so a client that disconnects after the
// handler finished still gets the replay when it retries.
//
// Thread-safety: a Guard is safe for concurrent use. Decisions and
// ClaimHandles (claim_handle.h) are single-owner values that may move
// between threads. The Guard must outlive every Decision and ClaimHandle it
// returned.

#ifndef IDEM_GUARD_H_
#define IDEM_GUARD_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "idem/claim_handle.h"
#include "idem/claim_lease.h"
#include "idem/clock.h"
#include "idem/error.h"
#include "idem/guard_options.h"
#include "idem/guard_setup.h"
#include "idem/log.h"
#include "idem/metrics.h"
#include "idem/observer.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/types.h"

namespace idem {

using HeaderView = std::pair<std::string_view, std::string_view>;

// A request as the Guard sees it; views into the adapter's request object,
// valid for the duration of the Begin call only.
struct RequestView {
  std::string_view method;
  // Path and query exactly as received.
  std::string_view target;
  // The route pattern the adapter matched (e.g. "/orders/{id}"); names the
  // operation when the route has key_per_operation. Empty: the target's
  // path (without the query) stands in.
  std::string_view route;
  // Every request header as received (repeated names included).
  std::span<const HeaderView> headers;
  std::string_view body;
  // Set by an adapter that stopped reading a body larger than
  // max_request_body; `body` is then incomplete and ignored.
  bool body_too_large = false;
  // The authenticated principal the key belongs to; nullopt is anonymous.
  std::optional<std::string_view> scope;
};

enum class Action {
  kRespond,      // Send Decision::response; do not run the handler.
  kExecute,      // Run the handler under Decision::claim.
  kPassThrough,  // Run the handler unprotected (nothing is stored).
  kWait,         // Call Guard::Resume after Decision::retry_in.
  // Only from BeginWithoutBlocking: the claim needs a store call that may
  // block; call Guard::Resume at once, on a thread that may block.
  kCallStore,
};

// What Guard::Run did, for a caller that must know whether a retry replays.
struct RunInfo {
  // The step outcome (as Decision::outcome).
  Outcome outcome = Outcome::kUnprotected;
  // Set when the handler ran under a claim: how Finish ended. Unset when
  // Run answered without the handler or ran it unprotected (kUnprotected,
  // kAnonymousBypassed, kTooLarge, kFailOpen: nothing stored, a retry runs
  // it again).
  std::optional<FinishResult> finish;
};

namespace detail {
struct WaitState;
struct GuardRenewal;
}  // namespace detail

struct Decision {
  Action action = Action::kRespond;
  // The step outcome counted for this request (kExecuted for kExecute;
  // kUnprotected, kAnonymousBypassed, kTooLarge or kFailOpen for
  // kPassThrough). Meaningless
  // while action == kWait: nothing is counted until the wait ends.
  Outcome outcome = Outcome::kUnprotected;
  // kRespond: the complete response (a problem, or a replay with the replay
  // header). Content-Length is the writer's to compute.
  Response response;
  // kExecute: the claim to Finish.
  ClaimHandle claim;
  // kWait: how long to wait before Resume.
  Duration retry_in{};
  // kWait, kCallStore: where the request stands; opaque.
  std::shared_ptr<detail::WaitState> wait;
};

class Guard {
 public:
  // kInvalidArgument when the store is missing or the options are invalid.
  static Result<std::unique_ptr<Guard>> Create(GuardSetup setup);

  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

  // A route's own options, validated by the same rules as the guard's
  // (GuardOptions::Validate): kInvalidArgument naming the bad field. Call it
  // where routes are registered, so a bad route fails at start-up; pass the
  // result to Begin, BeginWithKey, Run or RunOnce, which then do not
  // validate it again (route options made any other way are validated on
  // every request).
  static Result<std::shared_ptr<const GuardOptions>> MakeRouteOptions(
      GuardOptions options);

  // Whether Begin holds a request to `route` to route.max_request_body:
  // whether a larger body gets idem's answer (413, or the 400 or 401 that
  // comes first) rather than the handler, so that an adapter that reads
  // bodies itself may stop reading at that size and pass body_too_large.
  // Decided before the body is read, from the route, whether the request
  // carries an Idempotency-Key header, and, only when the answer depends on
  // it, `authenticated()` (whether the request has a scope; called at most
  // once). False: the body is not idem's to bound (oversize_request =
  // bypass, an optional key that is absent, or an anonymous request to an
  // anonymous = bypass route), and the adapter's own limit applies.
  template <typename IsAuthenticated>
  static bool BodyIsBounded(const GuardOptions& route, bool has_key,
                            IsAuthenticated&& authenticated) {
    if (route.oversize_request == OversizePolicy::kBypass) return false;
    if (!route.key_required && !has_key) return false;
    return route.anonymous != AnonymousPolicy::kBypass || authenticated();
  }

  // Steps 1-8 of SEMANTICS.md for one request, with the guard's options or
  // the route's own. Never throws and never returns an error: an unreachable
  // store becomes a 503 problem (fail-closed) or kPassThrough (fail-open
  // route), a damaged record a 500 problem (idempotency_record_damaged).
  // Route options that fail Validate (given without MakeRouteOptions) are
  // refused on every request: a 500 problem idempotency_route_invalid,
  // counted as kRouteInvalid, an error logged naming the bad field; the
  // store is not called and no back-off starts. With route.key_per_operation
  // the record id includes OperationName(request.method, request.route), the
  // route pattern (or the target's path when the adapter gives none). While
  // the switch is off (SetEnabled) every request passes through.
  Decision Begin(const RequestView& request,
                 std::shared_ptr<const GuardOptions> route = nullptr);

  // Begin for a thread that must not block (an adapter's I/O thread): the
  // same steps and the same decision, except that when the store may block
  // (Store::Info().calls_may_block) the claim is made here only if the
  // store answers it at once (Store::TryClaimWithoutBlocking: a local
  // cache's hit). Otherwise it returns Action::kCallStore, counted and
  // observed as nothing yet: the caller then calls Resume, on a thread that
  // may block, which makes the claim and returns the decision Begin would
  // have. Never blocks on the store; parses, fingerprints (hashes the
  // body) and checks as Begin does. `request` is not needed by Resume.
  Decision BeginWithoutBlocking(
      const RequestView& request,
      std::shared_ptr<const GuardOptions> route = nullptr);

  // For callers without HTTP: the same procedure with a key the caller
  // derived itself (any bytes, 1..max_key_length long) and a fingerprint
  // over `operation` and `input`. See once.h. With key_per_operation the
  // record id includes OperationName("CALL", operation), so one key with
  // two operations names two records instead of a mismatch.
  Decision BeginWithKey(std::string_view scope, std::string_view key,
                        std::string_view operation, std::string_view input,
                        std::shared_ptr<const GuardOptions> route = nullptr);

  // Continues a kWait decision: claims again, and either ends the wait
  // (replay, execute, ...) or asks for another wait; after lock_wait it
  // answers 409. Continues a kCallStore decision: makes its first claim
  // (the decision Begin would have made). Any other decision is returned
  // as it is. Blocks on the store.
  Decision Resume(Decision waiting);

  // Whether StartResume and ClaimHandle::StartFinish can make their store
  // calls without blocking: the store's Info().async_calls, read once.
  bool calls_store_asynchronously() const { return store_async_; }

  // Resume's store call without blocking, for an adapter's I/O thread on a
  // store whose calls are asynchronous (calls_store_asynchronously()):
  // starts the claim of a kCallStore or kWait decision with
  // Store::ClaimAsync and returns true at once; `answered` is called once,
  // on the store's thread (or inside this call), when the store has
  // answered. It must not block: it hands the decision on to a thread of
  // the caller's, which then calls Resume(std::move(waiting)): that makes
  // no store call and returns the decision from the store's answer, as
  // Resume would have. Until `answered` ran, `waiting` must not be used.
  // Returns false, doing nothing, for any other decision, or when the store
  // is not asynchronous (then call Resume where it may block).
  bool StartResume(Decision& waiting, std::function<void()> answered);

  // Begin, wait (sleeping on the guard's clock), run `handler` when the key
  // is acquired or unprotected, Finish, and return what to send. `handler`
  // is a callable returning Response, taking nothing or the ClaimHandle&
  // (inactive when the request runs unprotected), e.g. to complete the
  // record in its own transaction (idem/sql_transaction.h); if it throws,
  // the key is released and the exception propagates. With the route's
  // lock_renewal, the claim is renewed while `handler` runs, on one thread
  // per Guard (started when the first such claim is made, driven by the
  // Guard's clock). With `info`, Run also says what it did (RunInfo), e.g.
  // that the response was sent unstored.
  template <typename Handler>
  Response Run(const RequestView& request, Handler&& handler,
               std::shared_ptr<const GuardOptions> route = nullptr,
               RunInfo* info = nullptr) {
    Decision d = Begin(request, std::move(route));
    while (d.action == Action::kWait) {
      clock_->SleepFor(d.retry_in);
      d = Resume(std::move(d));
    }
    if (info != nullptr) *info = RunInfo{d.outcome, std::nullopt};
    if (d.action == Action::kRespond) return std::move(d.response);
    Response response;
    {
      detail::RenewWhileRunning renewing(*this, d.claim);
      if constexpr (std::is_invocable_v<Handler&, ClaimHandle&>) {
        response = handler(d.claim);
      } else {
        response = handler();
      }
    }
    if (d.action == Action::kExecute) {
      const FinishResult finish = d.claim.Finish(response);
      if (info != nullptr) info->finish = finish;
    }
    return response;
  }

  // The global switch (SEMANTICS.md, step 0). While it is off, Begin and
  // BeginWithKey pass every request through unprotected (kPassThrough,
  // counted `unprotected`, observers told) without calling the store, on
  // every route; requests already past Begin (a claim whose handler runs, a
  // lock_wait in progress) end as they began, so no record is left
  // in_progress. Switching off logs a warning and switching on again an
  // info line, once per change and never rate-limited, so an operator sees
  // that protection is off. Safe from any thread. Starts as
  // GuardSetup::enabled (default: on).
  void SetEnabled(bool enabled);
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  const GuardOptions& options() const { return *options_; }
  const std::shared_ptr<const GuardOptions>& shared_options() const {
    return options_;
  }
  Metrics& metrics() { return *metrics_; }
  Store& store() { return *store_; }
  Clock& clock() { return *clock_; }
  // GuardSetup::observers, e.g. for an adapter's second Guard that answers
  // for this one.
  const std::vector<std::shared_ptr<GuardObserver>>& observers() const {
    return observers_;
  }

 private:
  friend class ClaimHandle;
  // What the request-latency histogram and the observers learn of one
  // decision while it is made (guard.cc).
  struct Trace;
  friend struct detail::GuardRenewal;  // Lock renewal (renewal.h).
  explicit Guard(GuardSetup setup);

  // Starts `trace` and runs the steps. `may_block`: whether the claim may
  // call a store that blocks (Begin) or must return kCallStore instead
  // (BeginWithoutBlocking).
  Decision BeginSteps(const RequestView& request,
                      std::shared_ptr<const GuardOptions> route, Trace& trace,
                      bool may_block);
  Decision BeginWithKeySteps(std::string_view scope, std::string_view key,
                             std::string_view operation, std::string_view input,
                             std::shared_ptr<const GuardOptions> route,
                             Trace& trace);
  // Times the decision, tells the observers and, for kExecute, stamps the
  // claim; a kWait decision is not final and is left alone.
  void Decided(Decision& d, const Trace& trace);
  // Claims `state`'s record. `owner` shares `state` when it is shared
  // already (Resume), else is null: `state` is the Begin call's, copied
  // into a shared one only for a decision that carries it (kWait,
  // kCallStore).
  Decision Claim(detail::WaitState& state,
                 std::shared_ptr<detail::WaitState> owner, Trace& trace,
                 bool may_block = true);
  // The decision of a claim the store answered (`claimed`), made at `now`.
  Decision Claimed(Result<ClaimResult> claimed, TimePoint now,
                   detail::WaitState& state,
                   std::shared_ptr<detail::WaitState> owner, Trace& trace);
  // Keeps what Resume needs of `trace` in `state` (the request's own views
  // die with the Begin call).
  void KeepTrace(detail::WaitState& state, const Trace& trace) const;
  Decision Respond(Outcome outcome, Response response);
  // The problem answer of `outcome` (the table in guard.cc); `detail`
  // replaces the table's when not empty.
  Decision Problem(Outcome outcome, const GuardOptions& options,
                   std::string_view instance, std::string detail = {});
  Decision PassThrough(Outcome outcome);
  bool InFailOpenBackoff(const GuardOptions& route, TimePoint now) const;
  std::optional<Decision> RefuseInvalidRoute(
      const std::shared_ptr<const GuardOptions>& route,
      std::string_view instance);
  // Through the rate limit (GuardSetup::log_repeat_interval); `kind` as
  // LogRateLimiter::Log's (empty: the message's shape).
  void Log(LogLevel level, const std::string& message,
           std::string_view kind = {}) const;
  // Returns the Release call's latency; a failed call is counted
  // (CountedEvent::kReleaseFailed) and logged.
  Duration ReleaseClaim(const ClaimHandle& claim, Outcome outcome);
  // Why `claim`'s completion found it lost, for the log: its record deleted
  // (revoked, evicted) or the key taken over (guard_answers.cc). Reads the
  // record (Store::Inspect); never names the key.
  std::string ClaimLostReason(const ClaimHandle& claim);
  // The end of a claim (Finish, Abandon, Forget, or a Finish variant):
  // times the executed request and tells the observers. `store_latency` is
  // the ending store call's, zero without one.
  void ClaimEnded(const ClaimHandle& claim, FinishResult result, int status,
                  Duration store_latency);
  // For lock renewal: tells every observer of `event` (OnRenewal). A no-op
  // without observers.
  void NotifyRenewal(const RenewalEvent& event);

  std::shared_ptr<Store> store_;
  // store_->Info().calls_may_block and async_calls, read once (Info builds
  // a string).
  bool store_may_block_ = true;
  bool store_async_ = false;
  std::shared_ptr<const GuardOptions> options_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Metrics> metrics_;
  const std::vector<std::shared_ptr<GuardObserver>> observers_;
  // The sink without the rate limit, for the global switch's lines.
  LogSink switch_log_;
  // The rate-limited log, or null when log_repeat_interval is 0 (then
  // switch_log_ gets every line).
  std::unique_ptr<LogRateLimiter> log_;
  std::atomic<bool> enabled_{true};
  // Fail-open backoff: until this time (clock ns) fail-open routes skip the
  // store (the latest back-off any fail-open route started).
  std::atomic<Duration::rep> skip_store_until_{0};
  // The thread that renews claims for Run and RunOnce, started on the first
  // claim whose route has lock_renewal. Declared last: stopped before the
  // members its renewals use are destroyed.
  std::once_flag renewer_once_;
  std::shared_ptr<detail::Renewer> renewer_;
};

}  // namespace idem

#endif  // IDEM_GUARD_H_
