// Metrics as Prometheus text: which family each outcome is in (steps in
// idem_requests_total, follow-ups in idem_request_followups_total), the
// event counters, where an observation lands, the cumulative buckets, the
// sum and count, and which outcomes have a request histogram (the step
// outcomes only).

#include "idem/metrics.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace idem {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Line(std::string_view outcome, std::string_view le,
                 std::uint64_t value) {
  return "idem_request_duration_seconds_bucket{outcome=\"" +
         std::string(outcome) + "\",le=\"" + std::string(le) + "\"} " +
         std::to_string(value) + "\n";
}

TEST(MetricsTest, RequestLatencyLandsInItsBucketCumulatively) {
  Metrics m;
  m.ObserveRequest(Outcome::kReplayed, microseconds(300));  // le=0.0005
  m.ObserveRequest(Outcome::kReplayed, milliseconds(3));    // le=0.005
  m.ObserveRequest(Outcome::kReplayed, milliseconds(20));   // le=0.05
  const std::string text = m.RenderPrometheus();
  EXPECT_THAT(text, HasSubstr(Line("replayed", "0.0001", 0)));
  EXPECT_THAT(text, HasSubstr(Line("replayed", "0.0005", 1)));
  EXPECT_THAT(text, HasSubstr(Line("replayed", "0.0025", 1)));
  EXPECT_THAT(text, HasSubstr(Line("replayed", "0.005", 2)));
  EXPECT_THAT(text, HasSubstr(Line("replayed", "0.05", 3)));
  EXPECT_THAT(text, HasSubstr(Line("replayed", "+Inf", 3)));
  EXPECT_THAT(text, HasSubstr("idem_request_duration_seconds_sum{outcome="
                              "\"replayed\"} 0.023300000\n"));
  EXPECT_THAT(text, HasSubstr("idem_request_duration_seconds_count{outcome="
                              "\"replayed\"} 3\n"));
  EXPECT_EQ(m.RequestLatencyCount(Outcome::kReplayed), 3u);
  // Other outcomes are rendered, empty.
  EXPECT_THAT(text, HasSubstr(Line("executed", "+Inf", 0)));
}

TEST(MetricsTest, RequestHistogramsUseTheStoreHistogramsBuckets) {
  Metrics m;
  const std::string text = m.RenderPrometheus();
  for (double bound : Metrics::kLatencyBuckets) {
    char le[32];
    std::snprintf(le, sizeof le, "%g", bound);
    EXPECT_THAT(text, HasSubstr(Line("executed", le, 0)));
    EXPECT_THAT(text, HasSubstr("idem_store_operation_duration_seconds_bucket{"
                                "operation=\"claim\",le=\"" +
                                std::string(le) + "\"} 0\n"));
  }
}

TEST(MetricsTest, FollowUpsHaveNoRequestHistogram) {
  Metrics m;
  m.ObserveRequest(Outcome::kReleased, milliseconds(1));
  m.ObserveRequest(Outcome::kRenewalLost, milliseconds(1));
  EXPECT_EQ(m.RequestLatencyCount(Outcome::kReleased), 0u);
  const std::string text = m.RenderPrometheus();
  EXPECT_THAT(text, Not(HasSubstr("outcome=\"released\",le=")));
  EXPECT_THAT(text, Not(HasSubstr("outcome=\"takeover\",le=")));
  // Every step outcome has one.
  for (int i = 0; i <= static_cast<int>(kLastStepOutcome); ++i) {
    EXPECT_THAT(text,
                HasSubstr("idem_request_duration_seconds_count{outcome=\"" +
                          std::string(OutcomeName(static_cast<Outcome>(i))) +
                          "\"} 0\n"));
  }
}

// Issue 27 #2: sum(idem_requests_total) is the number of protected
// requests, so no follow-up may be in that family.
TEST(MetricsTest, StepOutcomesAndFollowUpsAreSeparateFamilies) {
  Metrics m;
  for (int i = 0; i < kOutcomeCount; ++i) {
    m.Count(static_cast<Outcome>(i));
  }
  const std::string text = m.RenderPrometheus();
  EXPECT_THAT(text, HasSubstr("# TYPE idem_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE idem_request_followups_total counter\n"));
  for (int i = 0; i < kOutcomeCount; ++i) {
    const auto outcome = static_cast<Outcome>(i);
    const std::string label =
        "{outcome=\"" + std::string(OutcomeName(outcome)) + "\"} 1\n";
    const std::string in = IsStepOutcome(outcome)
                               ? "idem_requests_total"
                               : "idem_request_followups_total";
    const std::string out = IsStepOutcome(outcome)
                                ? "idem_request_followups_total"
                                : "idem_requests_total";
    EXPECT_THAT(text, HasSubstr("\n" + in + label)) << OutcomeName(outcome);
    EXPECT_THAT(text, Not(HasSubstr("\n" + out + label)))
        << OutcomeName(outcome);
  }
  for (Outcome followup :
       {Outcome::kReleased, Outcome::kNotStored, Outcome::kStaleComplete,
        Outcome::kStoreFailed, Outcome::kTakeover, Outcome::kRenewalLost}) {
    EXPECT_FALSE(IsStepOutcome(followup)) << OutcomeName(followup);
  }
  EXPECT_TRUE(IsStepOutcome(Outcome::kAnonymousBypassed));
  EXPECT_EQ(OutcomeName(Outcome::kAnonymousBypassed), "anonymous_bypassed");
  EXPECT_TRUE(IsStepOutcome(Outcome::kBodyNotJson));
  EXPECT_EQ(OutcomeName(Outcome::kBodyNotJson), "body_not_json");
}

TEST(MetricsTest, EventsHaveAFamilyEach) {
  Metrics m;
  m.Count(CountedEvent::kReleaseFailed);
  m.Count(CountedEvent::kRenewal, 3);
  m.Count(CountedEvent::kRenewalFailed);
  m.Count(CountedEvent::kSweeperPurged, 1000);
  m.Count(CountedEvent::kSweeperError, 2);
  m.Count(CountedEvent::kLocalCacheHit, 9);
  m.Count(CountedEvent::kLocalCacheMiss, 4);
  m.Count(CountedEvent::kLocalCacheEviction, 5);
  EXPECT_EQ(m.Get(CountedEvent::kRenewal), 3u);
  const std::string text = m.RenderPrometheus();
  for (const auto& [family, value] : std::vector<std::pair<std::string, int>>{
           {"idem_release_failures_total", 1},
           {"idem_lock_renewals_total", 3},
           {"idem_lock_renewal_failures_total", 1},
           {"idem_sweeper_purged_records_total", 1000},
           {"idem_sweeper_errors_total", 2},
           {"idem_store_local_cache_hits_total", 9},
           {"idem_store_local_cache_misses_total", 4},
           {"idem_store_local_cache_evictions_total", 5}}) {
    EXPECT_THAT(text, HasSubstr("# TYPE " + family + " counter\n"));
    EXPECT_THAT(text, HasSubstr("# HELP " + family + " "));
    EXPECT_THAT(text,
                HasSubstr("\n" + family + " " + std::to_string(value) + "\n"));
  }
}

}  // namespace
}  // namespace idem
