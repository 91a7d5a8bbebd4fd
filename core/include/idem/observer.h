// GuardObserver: what a Guard tells an application about each protected
// request, so that it can open tracing spans (OpenTelemetry or any other) or
// write its own log lines, without idem depending on a tracing library.
//
// Events, per request: one OnDecision when Begin (or Resume, at the end of
// a wait) decides; then, for a request that ran under a claim, any number of
// OnRenewal while the handler runs (lock_renewal) and one OnFinish.
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
  // The step outcome counted for the request.
  Outcome outcome = Outcome::kUnprotected;
  std::string_view method;
  // The route pattern the adapter matched, or the request target.
  std::string_view route;
  // The record, when the request got as far as a key (unset for
  // key_missing, unprotected before the key, key_invalid, ...).
  std::optional<RecordId> record_id;
  // Time spent in store calls for this decision (claims, including the
  // polls of a lock_wait); zero when the store was not called.
  Duration store_latency{};
  // From Begin to this decision (includes lock_wait).
  Duration elapsed{};
};

struct FinishEvent {
  RecordId record_id;
  FinishResult result;
  int status = 0;            // The handler's response status.
  Duration store_latency{};  // The Complete or Release call.
  // From Begin to the end of Finish.
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
