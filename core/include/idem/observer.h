// GuardObserver: what a Guard tells an application about each protected
// request, so that it can open tracing spans (OpenTelemetry or any other) or
// write its own log lines, without idem depending on a tracing library.
// docs/GUIDE.md, "Observing requests", has examples.
//
// Events, per request: one OnDecision when Begin, BeginWithKey or Resume
// makes the final decision (never for a kWait, which is not final: a
// lock_wait yields one OnDecision, at its end); then, for a request that
// runs under a claim (outcome kExecuted), any number of OnRenewal while the
// handler runs (lock_renewal) and exactly one OnFinish when the claim ends
// (ClaimHandle::Finish, Abandon, Forget, or the handle's destruction).
// Requests that pass through (unprotected, fail_open, too_large with
// oversize_request = bypass) get only OnDecision: the Guard does not see
// their handler end. Observers are called in GuardSetup order.
//
// Latencies are measured on the steady clock (not the Guard's Clock).
// Views in an event are valid during the call only.
//
// Cost: a Guard without observers only tests that its list is empty; with
// observers, an executed request also copies its method and route into its
// ClaimHandle for OnFinish.
//
// Thread-safety: the Guard calls an observer from whichever thread made the
// Guard call (an adapter's I/O thread, a store-call pool thread, a renewal
// timer), concurrently for different requests; an observer must be safe
// for concurrent use and should return quickly (it runs on request paths).
// An observer must not throw.

#ifndef IDEM_OBSERVER_H_
#define IDEM_OBSERVER_H_

#include <optional>
#include <string_view>

#include "idem/clock.h"
#include "idem/metrics.h"
#include "idem/types.h"

namespace idem {

enum class FinishResult;

struct DecisionEvent {
  // The step outcome counted for the request (Decision::outcome).
  Outcome outcome = Outcome::kUnprotected;
  // The request's method; "CALL" for BeginWithKey (RunOnce).
  std::string_view method;
  // The route pattern the adapter matched (RequestView::route), else the
  // target's path without the query; BeginWithKey's `operation`.
  std::string_view route;
  // The record, when the request got as far as a key and a fingerprint
  // (unset for key_missing, key_invalid, too_large, the switch, a
  // fail-open back-off, ...). The hash the log lines name, never the key.
  std::optional<RecordId> record_id;
  // Time spent in store calls for this decision (claims, including the
  // polls of a lock_wait); zero when the store was not called.
  Duration store_latency{};
  // From the Begin call to this decision (includes lock_wait).
  Duration elapsed{};
};

struct FinishEvent {
  RecordId record_id;
  // kStored, kReleased (also Abandon and a destroyed handle),
  // kNotStored, kStaleComplete, or kStoreFailed (also Forget).
  FinishResult result;
  // The handler's response status; 0 without one (Abandon, Forget).
  int status = 0;
  // As in DecisionEvent (the request's).
  std::string_view method;
  std::string_view route;
  // The Complete or Release call; zero without one (Forget).
  Duration store_latency{};
  // From the Begin call to the end of the claim (handler and store call
  // included).
  Duration elapsed{};
};

struct RenewalEvent {
  RecordId record_id;
  // The claim still held (locked until now + lock_timeout).
  bool renewed = false;
  // The renewal found the claim lost (renewal_lost); the late Finish will
  // be kStaleComplete.
  bool lost = false;
  // The store call failed; the claim may still be held.
  bool store_failed = false;
  Duration store_latency{};
};

class GuardObserver {
 public:
  virtual ~GuardObserver() = default;
  virtual void OnDecision(const DecisionEvent&) {}
  virtual void OnFinish(const FinishEvent&) {}
  virtual void OnRenewal(const RenewalEvent&) {}
};

}  // namespace idem

#endif  // IDEM_OBSERVER_H_
