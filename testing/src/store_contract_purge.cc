// The store contract for PurgeExpired and the Sweeper over it; see
// store_contract.h.
// Same rules as store_contract.cc: explicit TimePoints from the fixture's
// ManualClock, nothing sleeps, every loop bounded.

#include <chrono>

#include "idem/sweeper.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "idem/types.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::PurgeContractAnchor() { return 0; }

namespace {

using contract::Describe;
using contract::kForever;
using contract::kLock;
using contract::kTtl;
using contract::RichResponse;
using contract::TestFp;
using contract::TestId;
using std::chrono::hours;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// Ids 0..short_count-1 live `short_ttl`, the next long_count live a day; every
// other one is completed so that both states are purged.
void FillForPurge(Store& store, TimePoint t0, int short_count, int long_count,
                  Duration short_ttl) {
  for (int i = 0; i < short_count + long_count; ++i) {
    const Duration ttl = i < short_count ? short_ttl : kTtl;
    auto claim = store.Claim(TestId(i), TestFp(1), t0, ttl, kLock);
    ASSERT_THAT(claim, IsOk());
    ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    if (i % 2 == 0) {
      auto completed = store.Complete(TestId(i), claim->token, RichResponse());
      ASSERT_THAT(completed, IsOk());
      ASSERT_TRUE(*completed);
    }
  }
}

}  // namespace

TEST_P(StoreContractTest, PurgeExpiredRemovesOnlyExpiredRecords) {
  const TimePoint t0 = Now();
  const Duration short_ttl = seconds(10);
  ASSERT_NO_FATAL_FAILURE(FillForPurge(store(), t0, 10, 6, short_ttl));

  // Nothing has expired yet, including one tick before.
  ASSERT_OK_AND_ASSIGN(
      std::size_t early,
      store().PurgeExpired(t0 + short_ttl - nanoseconds(1), 1000));
  EXPECT_EQ(early, 0u);

  const TimePoint t1 = t0 + short_ttl;
  ASSERT_OK_AND_ASSIGN(std::size_t purged, store().PurgeExpired(t1, 1000));
  EXPECT_EQ(purged, 10u);
  ASSERT_OK_AND_ASSIGN(std::size_t again, store().PurgeExpired(t1, 1000));
  EXPECT_EQ(again, 0u);

  // The live records are all still there, purged ones are gone even when
  // looked at as of a time before their expiry.
  for (int i = 0; i < 16; ++i) {
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(i), t0));
    EXPECT_EQ(record.has_value(), i >= 10) << "id " << i;
  }
}

TEST_P(StoreContractTest, PurgeExpiredHonoursTheLimit) {
  const TimePoint t0 = Now();
  const Duration short_ttl = seconds(10);
  ASSERT_NO_FATAL_FAILURE(FillForPurge(store(), t0, 10, 4, short_ttl));
  const TimePoint t1 = t0 + short_ttl + seconds(1);

  ASSERT_OK_AND_ASSIGN(std::size_t none, store().PurgeExpired(t1, 0));
  EXPECT_EQ(none, 0u);
  ASSERT_OK_AND_ASSIGN(std::size_t first, store().PurgeExpired(t1, 3));
  EXPECT_EQ(first, 3u);
  ASSERT_OK_AND_ASSIGN(std::size_t second, store().PurgeExpired(t1, 3));
  EXPECT_EQ(second, 3u);
  ASSERT_OK_AND_ASSIGN(std::size_t rest, store().PurgeExpired(t1, 100));
  EXPECT_EQ(rest, 4u);
  ASSERT_OK_AND_ASSIGN(std::size_t empty, store().PurgeExpired(t1, 100));
  EXPECT_EQ(empty, 0u);

  int live = 0;
  for (int i = 0; i < 14; ++i) {
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(i), t0));
    live += record.has_value();
  }
  EXPECT_EQ(live, 4);
}

TEST_P(StoreContractTest, PurgeExpiredOnAnEmptyStoreReturnsZero) {
  ASSERT_OK_AND_ASSIGN(std::size_t purged,
                       store().PurgeExpired(Now() + kForever, 100));
  EXPECT_EQ(purged, 0u);
}

TEST_P(StoreContractTest, PurgedIdsCanBeClaimedAgain) {
  const TimePoint t0 = Now();
  ASSERT_NO_FATAL_FAILURE(FillForPurge(store(), t0, 4, 0, seconds(10)));
  const TimePoint t1 = t0 + seconds(10);
  ASSERT_OK_AND_ASSIGN(std::size_t purged, store().PurgeExpired(t1, 100));
  EXPECT_EQ(purged, 4u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                         store().Claim(TestId(i), TestFp(2), t1, kTtl, kLock));
    EXPECT_EQ(claim.outcome, ClaimOutcome::kAcquired) << Describe(claim);
    EXPECT_FALSE(claim.takeover);
  }
}

// The background sweeper (sweeper.h) on this store: one pass, in several
// batches, deletes what expired and keeps what lives.
TEST_P(StoreContractTest, ASweepDeletesExpiredRecordsAndKeepsLiveOnes) {
  const TimePoint t0 = Now();
  const Duration short_ttl = seconds(10);
  ASSERT_NO_FATAL_FAILURE(FillForPurge(store(), t0, 10, 6, short_ttl));
  ASSERT_OK_AND_ASSIGN(auto sweeper,
                       Sweeper::Start(store(), {.interval = Duration::zero(),
                                                .batch = 4,
                                                .max_pass_time = hours(1),
                                                .clock = shared_clock()}));
  ASSERT_OK_AND_ASSIGN(std::size_t early, sweeper->SweepOnce());
  EXPECT_EQ(early, 0u);

  clock().Advance(short_ttl);
  ASSERT_OK_AND_ASSIGN(std::size_t purged, sweeper->SweepOnce());
  EXPECT_EQ(purged, 10u);
  const SweeperStats stats = sweeper->stats();
  EXPECT_EQ(stats.purged, 10u);
  EXPECT_EQ(stats.passes, 2u);
  EXPECT_EQ(stats.errors, 0u);
  // Batches of 4: 4, 4, 2 (short: the pass ends), after the empty first pass.
  EXPECT_EQ(stats.batches, 4u);
  for (int i = 0; i < 16; ++i) {
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(i), t0));
    EXPECT_EQ(record.has_value(), i >= 10) << "id " << i;
  }
}

}  // namespace idem::testing
