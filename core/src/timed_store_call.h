// Private to core: the Guard's and ClaimHandle's store calls, timed.
#ifndef IDEM_CORE_SRC_TIMED_STORE_CALL_H_
#define IDEM_CORE_SRC_TIMED_STORE_CALL_H_

#include <chrono>
#include <utility>

#include "idem/clock.h"
#include "idem/metrics.h"

namespace idem::internal {

// Timed's bookkeeping, for a call timed from `start` to now: for a caller
// that counts only some outcomes as store calls (a TryClaimWithoutBlocking
// that answered).
inline void Observed(Metrics& metrics, StoreOperation op, Duration& latency,
                     std::chrono::steady_clock::time_point start) {
  const auto took = std::chrono::steady_clock::now() - start;
  metrics.ObserveStoreLatency(op, took);
  latency += std::chrono::duration_cast<Duration>(took);
}

// Runs the store call `fn`, observes its latency for `op` and adds it to
// `latency`; on the steady clock, as every latency (Guard::Trace in
// guard_trace.h).
template <typename Fn>
auto Timed(Metrics& metrics, StoreOperation op, Duration& latency, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  auto result = fn();
  Observed(metrics, op, latency, start);
  return result;
}

template <typename Fn>
auto Timed(Metrics& metrics, StoreOperation op, Fn&& fn) {
  Duration unused{};
  return Timed(metrics, op, unused, std::forward<Fn>(fn));
}

}  // namespace idem::internal

#endif  // IDEM_CORE_SRC_TIMED_STORE_CALL_H_
