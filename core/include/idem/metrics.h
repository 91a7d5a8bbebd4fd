// Request outcome counters, the alertable event counters, request latency
// and store latency histograms, rendered as Prometheus text (SEMANTICS.md,
// "What happens to the handler's response"; docs/GUIDE.md, "Metrics").
//
// Two families count requests, so that each adds up:
//  - idem_requests_total{outcome="..."}: the step outcomes (kKeyMissing ..
//    kLastStepOutcome). Every request that reaches a protected route adds
//    exactly one, so sum(idem_requests_total) is the number of requests to
//    protected routes.
//  - idem_request_followups_total{outcome="..."}: what happened later to an
//    executed request's claim (kFirstFollowUp .. kRenewalLost): its key
//    released, its response not stored, its completion stale or failed, the
//    claim itself a takeover, a renewal that found it lost. A request adds
//    none or several, so they are not in the first family's sum.
//
// Events that are not outcomes of one request (CountedEvent) have a family
// each: the alertable idem_release_failures_total, idem_lock_renewals_total,
// idem_lock_renewal_failures_total, idem_sweeper_purged_records_total,
// idem_sweeper_errors_total (docs/OPERATIONS.md says which to alert on), and
// the local cache's idem_store_local_cache_{hits,misses,evictions}_total
// (its hit ratio; store/local_cache.h).
//
// An anonymous request that ran unprotected under anonymous = bypass is the
// step outcome kAnonymousBypassed (anonymous_bypassed), not an event counted
// beside kUnprotected: it is one request's decision like any other, so it
// keeps the sum above exact, gets its latency histogram and reaches the
// observers as Decision::outcome; and `unprotected` keeps meaning "the route
// or the switch asked for no protection", which no client can choose, while
// anonymous_bypassed is a client's choice an operator may want to alert on.
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
  // anonymous = bypass: a request with a key and no scope ran unprotected.
  kAnonymousBypassed,
  // The route names the JSON members that identify a request
  // (GuardOptions::fingerprint_fields) and the body is not JSON: 400
  // idempotency_body_not_json (step 3b). Such a route cannot identify a
  // request without members, so it is refused rather than hashed raw.
  kBodyNotJson,
  // Follow-ups of an executed request (idem_request_followups_total).
  kReleased,       // The key was released (status not stored, Abandon).
  kNotStored,      // Body over max_stored_response: released.
  kStaleComplete,  // The completion found the claim lost.
  kStoreFailed,    // Complete failed, or the claim was forgotten.
  kTakeover,       // The claim took over a request whose lock timed out.
  kRenewalLost,    // A lock renewal found the claim lost (lock_renewal).
};
// The last step outcome: step outcomes are kKeyMissing..kLastStepOutcome,
// follow-ups kFirstFollowUp..kRenewalLost.
inline constexpr Outcome kLastStepOutcome = Outcome::kBodyNotJson;
inline constexpr Outcome kFirstFollowUp = Outcome::kReleased;
inline constexpr int kOutcomeCount =
    static_cast<int>(Outcome::kRenewalLost) + 1;

// Whether `outcome` is a step outcome (idem_requests_total) rather than a
// follow-up (idem_request_followups_total).
constexpr bool IsStepOutcome(Outcome outcome) {
  return static_cast<int>(outcome) <= static_cast<int>(kLastStepOutcome);
}

// The label value, e.g. "key_missing".
std::string_view OutcomeName(Outcome outcome);

// Events counted apart from any request outcome, each in a family of its
// own, named by CountedEventFamily:
enum class CountedEvent : int {
  // idem_release_failures_total: a Release call (status not stored, body
  // over max_stored_response, Abandon) failed with a store error: the key
  // stays locked until its lock_timeout (409 for its retries until then).
  // The request is counted `released` or `not_stored` all the same.
  kReleaseFailed,
  // idem_lock_renewals_total: lock renewal calls made (ExtendLock), by the
  // Guard's renewal thread or an adapter's timer.
  kRenewal,
  // idem_lock_renewal_failures_total: renewal calls that failed with a
  // store error while the handler still ran (the claim is kept and renewed
  // again; the lock may time out meanwhile). A claim found lost is the
  // follow-up renewal_lost instead.
  kRenewalFailed,
  // idem_sweeper_purged_records_total: expired records the background
  // sweeper deleted (SweeperOptions::metrics).
  kSweeperPurged,
  // idem_sweeper_errors_total: sweeper passes that ended on a store error.
  kSweeperError,
  // idem_store_local_cache_hits_total: claims a local cache
  // (store/local_cache.h) answered from memory, without a store call;
  // counted into LocalCacheOptions::metrics, which OpenStore (through
  // OpenWithLocalCache) sets from StoreOptions::metrics.
  kLocalCacheHit,
  // idem_store_local_cache_misses_total: claims a local cache passed to its
  // store (no fresh entry: a new key, an in-progress record, an entry older
  // than local_cache_ttl_s or evicted). Hit ratio: hits / (hits + misses).
  kLocalCacheMiss,
  // idem_store_local_cache_evictions_total: entries a local cache dropped
  // for room (local_cache records or local_cache_mb reached).
  kLocalCacheEviction,
};
inline constexpr int kCountedEventCount =
    static_cast<int>(CountedEvent::kLocalCacheEviction) + 1;
// The metric family, e.g. "idem_release_failures_total".
std::string_view CountedEventFamily(CountedEvent event);

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
  void Count(CountedEvent event, std::uint64_t n = 1) {
    events_[static_cast<int>(event)].fetch_add(n, std::memory_order_relaxed);
  }
  std::uint64_t Get(CountedEvent event) const {
    return events_[static_cast<int>(event)].load(std::memory_order_relaxed);
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
  std::array<std::atomic<std::uint64_t>, kCountedEventCount> events_{};
  std::array<Histogram, kStoreOperationCount> latency_{};
  std::array<Histogram, kStepOutcomeCount> request_latency_{};
};

}  // namespace idem

#endif  // IDEM_METRICS_H_
