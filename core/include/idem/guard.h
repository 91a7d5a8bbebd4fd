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
// ClaimHandles are single-owner values that may move between threads. The
// Guard must outlive every Decision and ClaimHandle it returned.

#ifndef IDEM_GUARD_H_
#define IDEM_GUARD_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/claim_lease.h"
#include "idem/clock.h"
#include "idem/error.h"
#include "idem/guard_options.h"
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
};

// What ClaimHandle::Finish did with the handler's response. Only kStored
// keeps the at-most-once promise for the key; every other value means the
// response was sent unstored and says what a retry will get.
enum class FinishResult {
  kStored,         // Completed: retries replay it.
  kReleased,       // Status not stored: the key was released; a retry runs
                   // the handler again.
  kNotStored,      // Body over max_stored_response: released, warning
                   // logged; a retry runs the handler again.
  kStaleComplete,  // The lock had been taken over; not stored, warning
                   // logged; retries replay the other request's response.
  kStoreFailed,    // Complete failed; the record stays in_progress until its
                   // lock times out (409 until then, then the handler runs
                   // again). Error logged.
  kInactive,       // The handle held no claim (moved-from or already used).
};

// What Guard::Run did, for a caller that must know whether a retry replays.
struct RunInfo {
  // The step outcome (as Decision::outcome).
  Outcome outcome = Outcome::kUnprotected;
  // Set when the handler ran under a claim: how Finish ended. Unset when
  // Run answered without the handler or ran it unprotected (kUnprotected,
  // kTooLarge, kFailOpen: nothing stored, a retry runs it again).
  std::optional<FinishResult> finish;
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

  // Stores `response` for replay, or releases the key, by the table of
  // SEMANTICS.md. Call it before sending the response. Blocks on the store.
  // The response to send is `response` itself, unchanged.
  FinishResult Finish(const Response& response);

  // Releases the key now (the handler failed). Counted as `released`.
  void Abandon();

  // Ends the claim without a store call, for an adapter that could not make
  // the Finish or Abandon call in time: the record stays in_progress until
  // its lock times out (a retry gets 409 until then, then runs the handler).
  // Counted as `store_failed`; `why` is logged as an error with the record.
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

 private:
  friend class Guard;
  void EndLease() {
    if (lease_) lease_->End();
  }

  Guard* guard_ = nullptr;
  RecordId id_;
  Token token_;
  bool takeover_ = false;
  std::shared_ptr<const GuardOptions> options_;
  std::shared_ptr<ClaimLease> lease_;
};

namespace detail {
struct WaitState;
struct GuardRenewal;
}  // namespace detail

struct Decision {
  Action action = Action::kRespond;
  // The step outcome counted for this request (kExecuted for kExecute;
  // kUnprotected, kTooLarge or kFailOpen for kPassThrough). Meaningless
  // while action == kWait: nothing is counted until the wait ends.
  Outcome outcome = Outcome::kUnprotected;
  // kRespond: the complete response (a problem, or a replay with the replay
  // header). Content-Length is the writer's to compute.
  Response response;
  // kExecute: the claim to Finish.
  ClaimHandle claim;
  // kWait: how long to wait before Resume.
  Duration retry_in{};
  // kWait: where the request stands; opaque.
  std::shared_ptr<detail::WaitState> wait;
};

// Everything a Guard needs. Only `store` is required.
struct GuardSetup {
  std::shared_ptr<Store> store;
  // The defaults for every route; a route may pass its own copy to Begin.
  GuardOptions options;
  // Default: SystemClock::Instance().
  std::shared_ptr<Clock> clock;
  // Default: a new Metrics owned by the Guard.
  std::shared_ptr<Metrics> metrics;
  // Told of every decision, finish and renewal (observer.h), in this
  // order, on the thread that made the call. Default: none.
  std::vector<std::shared_ptr<GuardObserver>> observers;
  // Default: no logging. Called until the Guard is destroyed (its
  // destructor writes pending repeat counts), so whatever it captures must
  // outlive the Guard.
  LogSink log;
  // Repeated log messages of one kind (log.h, LogRateLimiter) are written
  // once per this interval, with a count; 0 writes every message. Default:
  // 10 s.
  Duration log_repeat_interval = std::chrono::seconds(10);
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
  // store is not called and no back-off starts.
  Decision Begin(const RequestView& request,
                 std::shared_ptr<const GuardOptions> route = nullptr);

  // For callers without HTTP: the same procedure with a key the caller
  // derived itself (any bytes, 1..max_key_length long) and a fingerprint
  // over `operation` and `input`. See once.h.
  Decision BeginWithKey(std::string_view scope, std::string_view key,
                        std::string_view operation, std::string_view input,
                        std::shared_ptr<const GuardOptions> route = nullptr);

  // Continues a kWait decision: claims again, and either ends the wait
  // (replay, execute, ...) or asks for another wait; after lock_wait it
  // answers 409. Blocks on the store.
  Decision Resume(Decision waiting);

  // Begin, wait (sleeping on the guard's clock), run `handler` when the key
  // is acquired or unprotected, Finish, and return what to send. `handler`
  // is a callable returning Response; if it throws, the key is released and
  // the exception propagates. With the route's lock_renewal, the claim is
  // renewed while `handler` runs, on one thread per Guard (started when the
  // first such claim is made, driven by the Guard's clock). With `info`, Run
  // also says what it did (RunInfo), e.g. that the response was sent unstored.
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
      response = handler();
    }
    if (d.action == Action::kExecute) {
      const FinishResult finish = d.claim.Finish(response);
      if (info != nullptr) info->finish = finish;
    }
    return response;
  }

  const GuardOptions& options() const { return *options_; }
  const std::shared_ptr<const GuardOptions>& shared_options() const {
    return options_;
  }
  Metrics& metrics() { return *metrics_; }
  Store& store() { return *store_; }
  Clock& clock() { return *clock_; }

 private:
  friend class ClaimHandle;
  friend struct detail::GuardRenewal;  // Lock renewal (renewal.h).
  explicit Guard(GuardSetup setup);

  Decision Claim(std::shared_ptr<detail::WaitState> state);
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
  void Log(LogLevel level, const std::string& message) const;
  void ReleaseClaim(const ClaimHandle& claim, Outcome outcome);

  std::shared_ptr<Store> store_;
  std::shared_ptr<const GuardOptions> options_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Metrics> metrics_;
  LogSink log_;
  // Fail-open backoff: until this time (clock ns) fail-open routes skip the
  // store (the latest back-off any fail-open route started).
  std::atomic<Duration::rep> skip_store_until_{0};
  std::vector<std::shared_ptr<GuardObserver>> observers_;
  // The thread that renews claims for Run and RunOnce, started on the first
  // claim whose route has lock_renewal. Declared last: stopped before the
  // members its renewals use are destroyed.
  std::once_flag renewer_once_;
  std::shared_ptr<detail::Renewer> renewer_;
};

}  // namespace idem

#endif  // IDEM_GUARD_H_
