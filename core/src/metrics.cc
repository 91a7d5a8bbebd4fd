#include "idem/metrics.h"

#include <cstdio>

#include "idem/log.h"

namespace idem {

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kKeyMissing:
      return "key_missing";
    case Outcome::kUnprotected:
      return "unprotected";
    case Outcome::kKeyInvalid:
      return "key_invalid";
    case Outcome::kTooLarge:
      return "too_large";
    case Outcome::kMismatch:
      return "mismatch";
    case Outcome::kConflict:
      return "conflict";
    case Outcome::kReplayed:
      return "replayed";
    case Outcome::kExecuted:
      return "executed";
    case Outcome::kStoreError:
      return "store_error";
    case Outcome::kFailOpen:
      return "fail_open";
    case Outcome::kStoreFull:
      return "store_full";
    case Outcome::kAnonymousRejected:
      return "anonymous_rejected";
    case Outcome::kRecordDamaged:
      return "record_damaged";
    case Outcome::kRouteInvalid:
      return "route_invalid";
    case Outcome::kAnonymousBypassed:
      return "anonymous_bypassed";
    case Outcome::kBodyNotJson:
      return "body_not_json";
    case Outcome::kReleased:
      return "released";
    case Outcome::kNotStored:
      return "not_stored";
    case Outcome::kStaleComplete:
      return "stale_complete";
    case Outcome::kStoreFailed:
      return "store_failed";
    case Outcome::kTakeover:
      return "takeover";
    case Outcome::kRenewalLost:
      return "renewal_lost";
  }
  return "unknown";
}

std::string_view CountedEventFamily(CountedEvent event) {
  switch (event) {
    case CountedEvent::kReleaseFailed:
      return "idem_release_failures_total";
    case CountedEvent::kRenewal:
      return "idem_lock_renewals_total";
    case CountedEvent::kRenewalFailed:
      return "idem_lock_renewal_failures_total";
    case CountedEvent::kSweeperPurged:
      return "idem_sweeper_purged_records_total";
    case CountedEvent::kSweeperError:
      return "idem_sweeper_errors_total";
    case CountedEvent::kLocalCacheHit:
      return "idem_store_local_cache_hits_total";
    case CountedEvent::kLocalCacheMiss:
      return "idem_store_local_cache_misses_total";
    case CountedEvent::kLocalCacheEviction:
      return "idem_store_local_cache_evictions_total";
  }
  return "idem_unknown_total";
}

namespace {

// The HELP text of each CountedEvent's family.
std::string_view CountedEventHelp(CountedEvent event) {
  switch (event) {
    case CountedEvent::kReleaseFailed:
      return "Releases of a key that failed with a store error: the key "
             "stays locked until its lock timeout.";
    case CountedEvent::kRenewal:
      return "Lock renewal calls made while handlers ran.";
    case CountedEvent::kRenewalFailed:
      return "Lock renewal calls that failed with a store error (the claim "
             "is kept; its lock may time out).";
    case CountedEvent::kSweeperPurged:
      return "Expired records the background sweeper deleted.";
    case CountedEvent::kSweeperError:
      return "Background sweeper passes that ended on a store error.";
    case CountedEvent::kLocalCacheHit:
      return "Claims a local store cache answered from memory, without a "
             "store call.";
    case CountedEvent::kLocalCacheMiss:
      return "Claims a local store cache passed to its store (no fresh "
             "entry).";
    case CountedEvent::kLocalCacheEviction:
      return "Entries a local store cache dropped for room.";
  }
  return "";
}

// One counter family with an `outcome` label over outcomes first..last.
void RenderOutcomes(
    std::string_view family, std::string_view help, Outcome first, Outcome last,
    const std::array<std::atomic<std::uint64_t>, kOutcomeCount>& counters,
    std::string& out) {
  out.append("# HELP ").append(family).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(family).append(" counter\n");
  for (int i = static_cast<int>(first); i <= static_cast<int>(last); ++i) {
    out.append(family).append("{outcome=\"");
    out.append(OutcomeName(static_cast<Outcome>(i))).append("\"} ");
    out.append(std::to_string(counters[i].load(std::memory_order_relaxed)));
    out += '\n';
  }
}

}  // namespace

std::string_view StoreOperationName(StoreOperation op) {
  switch (op) {
    case StoreOperation::kClaim:
      return "claim";
    case StoreOperation::kComplete:
      return "complete";
    case StoreOperation::kRelease:
      return "release";
  }
  return "unknown";
}

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "unknown";
}

void Metrics::Histogram::Observe(std::chrono::nanoseconds d) {
  const double seconds = static_cast<double>(d.count()) * 1e-9;
  std::size_t i = 0;
  while (i < kLatencyBuckets.size() && seconds > kLatencyBuckets[i]) ++i;
  // Buckets are stored non-cumulatively and summed when rendered, so an
  // observation touches one bucket instead of all larger ones.
  buckets[i].fetch_add(1, std::memory_order_relaxed);
  count.fetch_add(1, std::memory_order_relaxed);
  sum_ns.fetch_add(static_cast<std::uint64_t>(d.count() < 0 ? 0 : d.count()),
                   std::memory_order_relaxed);
}

void Metrics::Histogram::Render(std::string_view family,
                                std::string_view label_name,
                                std::string_view label,
                                std::string& out) const {
  const std::string labels =
      std::string(label_name) + "=\"" + std::string(label) + "\"";
  char number[32];
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b <= kLatencyBuckets.size(); ++b) {
    cumulative += buckets[b].load(std::memory_order_relaxed);
    if (b < kLatencyBuckets.size()) {
      std::snprintf(number, sizeof number, "%g", kLatencyBuckets[b]);
    } else {
      std::snprintf(number, sizeof number, "+Inf");
    }
    out.append(family).append("_bucket{").append(labels);
    out.append(",le=\"").append(number).append("\"} ");
    out.append(std::to_string(cumulative)).append("\n");
  }
  std::snprintf(
      number, sizeof number, "%.9f",
      static_cast<double>(sum_ns.load(std::memory_order_relaxed)) * 1e-9);
  out.append(family).append("_sum{").append(labels).append("} ");
  out.append(number).append("\n");
  out.append(family).append("_count{").append(labels).append("} ");
  out.append(std::to_string(count.load(std::memory_order_relaxed)));
  out.append("\n");
}

void Metrics::ObserveStoreLatency(StoreOperation op,
                                  std::chrono::nanoseconds d) {
  latency_[static_cast<int>(op)].Observe(d);
}

std::uint64_t Metrics::StoreLatencyCount(StoreOperation op) const {
  return latency_[static_cast<int>(op)].count.load(std::memory_order_relaxed);
}

void Metrics::ObserveRequest(Outcome outcome, std::chrono::nanoseconds d) {
  const int i = static_cast<int>(outcome);
  if (i < 0 || i >= kStepOutcomeCount) return;
  request_latency_[i].Observe(d);
}

std::uint64_t Metrics::RequestLatencyCount(Outcome outcome) const {
  const int i = static_cast<int>(outcome);
  if (i < 0 || i >= kStepOutcomeCount) return 0;
  return request_latency_[i].count.load(std::memory_order_relaxed);
}

std::string Metrics::RenderPrometheus() const {
  std::string out;
  RenderOutcomes("idem_requests_total",
                 "Requests to idempotency-protected routes, by step outcome: "
                 "exactly one per request.",
                 Outcome::kKeyMissing, kLastStepOutcome, counters_, out);
  RenderOutcomes("idem_request_followups_total",
                 "What happened to executed requests' claims after the "
                 "decision (released, not stored, stale or failed "
                 "completions, takeovers, lost renewals).",
                 kFirstFollowUp, Outcome::kRenewalLost, counters_, out);
  for (int i = 0; i < kCountedEventCount; ++i) {
    const auto event = static_cast<CountedEvent>(i);
    const std::string_view family = CountedEventFamily(event);
    out.append("# HELP ").append(family).append(" ");
    out.append(CountedEventHelp(event)).append("\n");
    out.append("# TYPE ").append(family).append(" counter\n");
    out.append(family).append(" ");
    out.append(std::to_string(events_[i].load(std::memory_order_relaxed)));
    out += '\n';
  }
  out +=
      "# HELP idem_request_duration_seconds Latency of requests to "
      "idempotency-protected routes by step outcome: from Begin to the "
      "decision, or for executed requests to the end of Finish (handler "
      "included).\n"
      "# TYPE idem_request_duration_seconds histogram\n";
  for (int i = 0; i < kStepOutcomeCount; ++i) {
    request_latency_[i].Render("idem_request_duration_seconds", "outcome",
                               OutcomeName(static_cast<Outcome>(i)), out);
  }
  out +=
      "# HELP idem_store_operation_duration_seconds Latency of store calls "
      "made by the guard.\n"
      "# TYPE idem_store_operation_duration_seconds histogram\n";
  for (int op = 0; op < kStoreOperationCount; ++op) {
    latency_[op].Render("idem_store_operation_duration_seconds", "operation",
                        StoreOperationName(static_cast<StoreOperation>(op)),
                        out);
  }
  return out;
}

}  // namespace idem
