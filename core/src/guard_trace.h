// The state a decision carries between the Guard's steps, shared by
// guard.cc (the request steps up to the claim) and guard_claim.cc (the claim
// and its retries): detail::WaitState, what a waiting request keeps between
// claim attempts, and Guard::Trace, what the observers and metrics get of
// one decision. Private to core/src.

#ifndef IDEM_CORE_SRC_GUARD_TRACE_H_
#define IDEM_CORE_SRC_GUARD_TRACE_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "idem/guard.h"

namespace idem {
namespace detail {

// A request's claim: on the Begin call's stack while the store answers at
// once, shared (a Decision's `wait`) between claim attempts, across a
// lock_wait or an asynchronous store call.
struct WaitState {
  RecordId id;
  Fingerprint fingerprint;
  std::shared_ptr<const GuardOptions> options;
  // The problems' instance: a view of the request's path or operation on
  // the stack, of kept_instance once shared.
  std::string_view instance;
  std::string kept_instance;
  TimePoint deadline;
  int attempt = 0;
  // The Trace of the decision so far (Guard::Resume continues it), kept at
  // its first kWait or kCallStore (Guard::KeepTrace; `started` unset until
  // then); method and route are copied only when the Guard has observers.
  std::chrono::steady_clock::time_point started;
  Duration store_latency{};
  std::string method;
  std::string route;
  // An asynchronous claim's answer and the time it was made at
  // (Guard::StartResume), written on the store's thread before the caller
  // is told; the Resume that follows takes it instead of calling the store.
  std::optional<Result<ClaimResult>> answer;
  TimePoint answer_now{};
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

}  // namespace idem

#endif  // IDEM_CORE_SRC_GUARD_TRACE_H_
