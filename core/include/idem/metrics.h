// Request outcome counters, request latency and store latency histograms,
// rendered as Prometheus text (SEMANTICS.md, "What happens to the handler's
// response").
//
// Every request that reaches a protected route adds exactly one step outcome
// (kKeyMissing .. kRouteInvalid); an executed request may then add one
// follow-up (kReleased, kNotStored, kStaleComplete, kStoreFailed), a
// takeover claim adds kTakeover, and a lock renewal that finds the claim
// lost adds kRenewalLost. All are exported as
// idem_requests_total{outcome="..."}, so the step outcomes sum to the number
// of protected requests and the follow-ups count on top of them.
//
// idem_request_duration_seconds{outcome="..."} has one histogram per step
// outcome: from the Begin call to the decision for requests answered by idem
// or passed through, and to the end of the claim (Finish, Abandon, Forget)
// for executed ones, so it includes their handler. An executed request is
// observed when its claim ends: once every claim has ended, each
// histogram's count equals its outcome's idem_requests_total.
//
// Thread-safety: all members are safe for concurrent use; counting is a
// relaxed atomic increment, no lock.

#ifndef IDEM_METRICS_H_
#define IDEM_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "idem/clock.h"

namespace idem {

enum class Outcome : int {
  // Step outcomes: exactly one per protected request.
  kKeyMissing,
  kUnprotected,
  kKeyInvalid,
  kTooLarge,
  kMismatch,
  kConflict,
  kReplayed,
  kExecuted,
  kStoreError,
  kFailOpen,
  kStoreFull,
  kAnonymousRejected,  // anonymous = reject: 401 for a request with a key.
  kRecordDamaged,      // The key's record cannot be decoded: 500 (step 8c).
  kRouteInvalid,       // The route's GuardOptions are invalid: 500.
  // Follow-ups of an executed request.
  kReleased,
  kNotStored,
  kStaleComplete,
  kStoreFailed,
  kTakeover,
  kRenewalLost,  // A lock renewal found the claim lost (lock_renewal).
};
// The last step outcome: step outcomes are kKeyMissing..kLastStepOutcome.
inline constexpr Outcome kLastStepOutcome = Outcome::kRouteInvalid;
inline constexpr int kOutcomeCount =
    static_cast<int>(Outcome::kRenewalLost) + 1;

// The label value, e.g. "key_missing".
std::string_view OutcomeName(Outcome outcome);

enum class StoreOperation : int { kClaim, kComplete, kRelease };
inline constexpr int kStoreOperationCount = 3;
std::string_view StoreOperationName(StoreOperation op);

class Metrics {
 public:
  // Upper bounds of the latency buckets, in seconds (plus +Inf).
  static constexpr std::array<double, 14> kLatencyBuckets = {
      1e-6,   5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3,
      2.5e-3, 5e-3, 1e-2, 5e-2, 1e-1, 1.0,  10.0};

  void Count(Outcome outcome) {
    counters_[static_cast<int>(outcome)].fetch_add(1,
                                                   std::memory_order_relaxed);
  }
  std::uint64_t Get(Outcome outcome) const {
    return counters_[static_cast<int>(outcome)].load(std::memory_order_relaxed);
  }
  void ObserveStoreLatency(StoreOperation op, std::chrono::nanoseconds d);
  // Observations of `op` so far.
  std::uint64_t StoreLatencyCount(StoreOperation op) const;
  // A request of step outcome `outcome` took `d`; other outcomes (the
  // follow-ups) are ignored.
  void ObserveRequest(Outcome outcome, std::chrono::nanoseconds d);
  // Observations of `outcome` so far.
  std::uint64_t RequestLatencyCount(Outcome outcome) const;

  // Prometheus text exposition format (version 0.0.4).
  std::string RenderPrometheus() const;

 private:
  struct Histogram {
    std::array<std::atomic<std::uint64_t>, kLatencyBuckets.size() + 1>
        buckets{};
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> sum_ns{0};

    void Observe(std::chrono::nanoseconds d);
    // The _bucket, _sum and _count lines of `family` for one label.
    void Render(std::string_view family, std::string_view label_name,
                std::string_view label, std::string& out) const;
  };
  static constexpr int kStepOutcomeCount =
      static_cast<int>(kLastStepOutcome) + 1;
  std::array<std::atomic<std::uint64_t>, kOutcomeCount> counters_{};
  std::array<Histogram, kStoreOperationCount> latency_{};
  std::array<Histogram, kStepOutcomeCount> request_latency_{};
};

}  // namespace idem

#endif  // IDEM_METRICS_H_
