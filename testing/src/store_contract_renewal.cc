// The store contract for lock renewal (Store::ExtendLock) and record counts
// (Store::Stats); see store_contract.h. Same rules as store_contract.cc:
// explicit TimePoints from the fixture's ManualClock, threads started on a
// barrier, bounded loops.

#include <barrier>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::RenewalContractAnchor() { return 0; }

namespace {

using contract::ClaimedRecord;
using contract::Describe;
using contract::ExpectSameRecord;
using contract::ForeignToken;
using contract::kLock;
using contract::kTtl;
using contract::Ns;
using contract::RichResponse;
using contract::TestFp;
using contract::TestId;
using std::chrono::seconds;

// The record a claim at `t` with kTtl and kLock wrote.
Record Claimed(const ClaimResult& claim, std::uint64_t fp, TimePoint t) {
  return ClaimedRecord(TestFp(fp), claim.token, t);
}

}  // namespace

TEST_P(StoreContractTest, ExtendLockMovesLockedUntilAndBlocksTheTakeover) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(claim, TestId(1), TestFp(1), t0);

  const TimePoint t1 = t0 + seconds(30);
  ASSERT_OK_AND_ASSIGN(bool renewed,
                       store().ExtendLock(TestId(1), claim.token, t1, kLock));
  EXPECT_TRUE(renewed);
  Record want = Claimed(claim, 1, t0);
  want.locked_until = t1 + kLock;
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, want);

  // At the old locked_until a retry would have taken over; now it waits.
  ASSERT_OK_AND_ASSIGN(
      ClaimResult retry,
      store().Claim(TestId(1), TestFp(1), t0 + kLock, kTtl, kLock));
  EXPECT_EQ(retry.outcome, ClaimOutcome::kInProgress) << Describe(retry);
  EXPECT_EQ(Ns(retry.locked_until), Ns(t1 + kLock));

  // The holder still completes, and the replay follows.
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), claim.token, RichResponse()));
  EXPECT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(
      ClaimResult replay,
      store().Claim(TestId(1), TestFp(1), t1 + kLock, kTtl, kLock));
  EXPECT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);

  // A renewed lock still times out: without more renewals, a takeover.
  ASSERT_OK_AND_ASSIGN(ClaimResult other,
                       store().Claim(TestId(2), TestFp(2), t0, kTtl, kLock));
  ASSERT_THAT(store().ExtendLock(TestId(2), other.token, t1, kLock), IsOk());
  ASSERT_OK_AND_ASSIGN(
      ClaimResult taken,
      store().Claim(TestId(2), TestFp(2), t1 + kLock, kTtl, kLock));
  EXPECT_EQ(taken.outcome, ClaimOutcome::kAcquired) << Describe(taken);
  EXPECT_TRUE(taken.takeover);
}

TEST_P(StoreContractTest, ExtendLockIsCappedAtExpiresAt) {
  const TimePoint t0 = Now();
  const Duration ttl = seconds(100);
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, ttl, kLock));
  const TimePoint t1 = t0 + seconds(50);
  ASSERT_OK_AND_ASSIGN(bool renewed,
                       store().ExtendLock(TestId(1), claim.token, t1, kLock));
  EXPECT_TRUE(renewed);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(Ns(record->locked_until), Ns(t0 + ttl));
  EXPECT_EQ(Ns(record->expires_at), Ns(t0 + ttl));
}

TEST_P(StoreContractTest, ExtendLockNeverShortensTheLock) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  // A shorter lock_timeout than the claim's, and a late call with an
  // earlier `now` after a longer renewal: neither moves the lock back.
  ASSERT_OK_AND_ASSIGN(
      bool shorter,
      store().ExtendLock(TestId(1), claim.token, t0 + seconds(1), seconds(10)));
  EXPECT_TRUE(shorter);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ExpectSameRecord(record, Claimed(claim, 1, t0));

  ASSERT_THAT(
      store().ExtendLock(TestId(1), claim.token, t0 + seconds(50), kLock),
      IsOk());
  ASSERT_OK_AND_ASSIGN(bool late, store().ExtendLock(TestId(1), claim.token,
                                                     t0 + seconds(20), kLock));
  EXPECT_TRUE(late);
  ASSERT_OK_AND_ASSIGN(record, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(Ns(record->locked_until), Ns(t0 + seconds(50) + kLock));
}

TEST_P(StoreContractTest, ATimedOutHolderNobodyTookOverMayRenew) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  const TimePoint late = t0 + kLock + seconds(1);
  ASSERT_OK_AND_ASSIGN(bool renewed,
                       store().ExtendLock(TestId(1), claim.token, late, kLock));
  EXPECT_TRUE(renewed);
  ASSERT_OK_AND_ASSIGN(ClaimResult retry,
                       store().Claim(TestId(1), TestFp(1), late, kTtl, kLock));
  EXPECT_EQ(retry.outcome, ClaimOutcome::kInProgress) << Describe(retry);
  EXPECT_EQ(Ns(retry.locked_until), Ns(late + kLock));
}

// Every way of having lost the claim: false, and the record as it was.
TEST_P(StoreContractTest, ExtendLockFailsWithoutTheClaimAndChangesNothing) {
  const TimePoint t0 = Now();
  const TimePoint t1 = t0 + seconds(1);
  auto expect_refused = [&](std::uint64_t n, const Token& token, TimePoint at,
                            TimePoint inspect_at, const char* why) {
    SCOPED_TRACE(why);
    ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(n), inspect_at));
    ASSERT_OK_AND_ASSIGN(bool renewed,
                         store().ExtendLock(TestId(n), token, at, kLock));
    EXPECT_FALSE(renewed);
    ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(n), inspect_at));
    EXPECT_EQ(after.has_value(), before.has_value());
    if (before.has_value()) ExpectSameRecord(after, *before);
  };

  expect_refused(1, ForeignToken(1), t1, t1, "absent");

  ASSERT_OK_AND_ASSIGN(ClaimResult held,
                       store().Claim(TestId(2), TestFp(2), t0, kTtl, kLock));
  expect_refused(2, ForeignToken(2), t1, t1, "another token");

  ASSERT_OK_AND_ASSIGN(ClaimResult done,
                       store().Claim(TestId(3), TestFp(3), t0, kTtl, kLock));
  ASSERT_THAT(store().Complete(TestId(3), done.token, RichResponse()), IsOk());
  expect_refused(3, done.token, t1, t1, "completed");

  ASSERT_OK_AND_ASSIGN(ClaimResult released,
                       store().Claim(TestId(4), TestFp(4), t0, kTtl, kLock));
  ASSERT_THAT(store().Release(TestId(4), released.token), IsOk());
  expect_refused(4, released.token, t1, t1, "released");

  ASSERT_OK_AND_ASSIGN(ClaimResult revoked,
                       store().Claim(TestId(5), TestFp(5), t0, kTtl, kLock));
  ASSERT_THAT(store().Revoke(TestId(5)), IsOk());
  expect_refused(5, revoked.token, t1, t1, "revoked");

  ASSERT_OK_AND_ASSIGN(ClaimResult old_holder,
                       store().Claim(TestId(6), TestFp(6), t0, kTtl, kLock));
  const TimePoint t2 = t0 + kLock;
  ASSERT_OK_AND_ASSIGN(ClaimResult taken,
                       store().Claim(TestId(6), TestFp(6), t2, kTtl, kLock));
  ASSERT_TRUE(taken.takeover) << Describe(taken);
  expect_refused(6, old_holder.token, t2, t2, "taken over");

  const Duration ttl = seconds(100);
  ASSERT_OK_AND_ASSIGN(ClaimResult expired,
                       store().Claim(TestId(7), TestFp(7), t0, ttl, kLock));
  // Inspected just before its expiry, where it is still visible.
  expect_refused(7, expired.token, t0 + ttl, t0 + ttl - seconds(1), "expired");

  EXPECT_NE(held.token, done.token);  // Both claims acquired.
}

TEST_P(StoreContractTest, ExtendLockRejectsANonPositiveLockTimeout) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  for (const Duration bad : {Duration::zero(), Duration(-seconds(1))}) {
    auto renewed = store().ExtendLock(TestId(1), claim.token, t0, bad);
    ASSERT_FALSE(renewed.has_value());
    EXPECT_EQ(renewed.error().code(), ErrorCode::kInvalidArgument)
        << renewed.error().ToString();
  }
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ExpectSameRecord(record, Claimed(claim, 1, t0));
}

// A holder renewing a timed-out lock while retries try to take it over:
// per round, either the renewals win (all true, no claim acquires) or one
// takeover wins (exactly one acquisition, every renewal false). Two
// renewers of the same token also race each other.
TEST_P(StoreContractTest, ExtendLockRacingTakeoversHasOneWinner) {
  constexpr int kRenewers = 2;
  constexpr int kClaimers = 4;
  constexpr int kRounds = 15;
  const TimePoint t0 = Now();
  const TimePoint late = t0 + kLock + seconds(1);
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const RecordId id = TestId(100 + round);
    ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                         store().Claim(id, TestFp(1), t0, kTtl, kLock));
    std::barrier start(kRenewers + kClaimers);
    std::vector<std::optional<Result<bool>>> renewals(kRenewers);
    std::vector<std::optional<Result<ClaimResult>>> claims(kClaimers);
    std::vector<std::thread> threads;
    for (int t = 0; t < kRenewers + kClaimers; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        if (t < kRenewers) {
          renewals[t] = store().ExtendLock(id, claim.token, late, kLock);
        } else {
          claims[t - kRenewers] =
              store().Claim(id, TestFp(1), late, kTtl, kLock);
        }
      });
    }
    for (std::thread& th : threads) th.join();
    int renewed = 0;
    for (const auto& r : renewals) {
      ASSERT_THAT(*r, IsOk());
      renewed += **r ? 1 : 0;
    }
    int acquired = 0;
    for (const auto& c : claims) {
      ASSERT_THAT(*c, IsOk());
      ASSERT_NE((*c)->outcome, ClaimOutcome::kMismatch);
      ASSERT_NE((*c)->outcome, ClaimOutcome::kCompleted);
      acquired += (*c)->outcome == ClaimOutcome::kAcquired ? 1 : 0;
    }
    if (renewed > 0) {
      EXPECT_EQ(renewed, kRenewers);
      EXPECT_EQ(acquired, 0);
    } else {
      EXPECT_EQ(acquired, 1);
    }
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(id, late));
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->token == claim.token, renewed > 0);
    EXPECT_EQ(Ns(record->locked_until), Ns(late + kLock));
  }
}

TEST_P(StoreContractTest, StatsCountRecordsByState) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(std::optional<StoreStats> empty, store().Stats(t0));
  if (!empty.has_value()) {
    GTEST_SKIP() << "needs the capability: a Stats() that counts records "
                    "(this store's Stats returns nullopt)";
  }
  EXPECT_EQ(empty->in_progress + empty->completed + empty->expired, 0u);

  const Duration short_ttl = seconds(10);
  for (std::uint64_t n = 1; n <= 3; ++n) {
    ASSERT_THAT(store().Claim(TestId(n), TestFp(n), t0, kTtl, kLock), IsOk());
  }
  // A timed-out lock is still in progress.
  ASSERT_THAT(store().Claim(TestId(4), TestFp(4), t0, kTtl, seconds(1)),
              IsOk());
  for (std::uint64_t n = 5; n <= 6; ++n) {
    ASSERT_OK_AND_ASSIGN(ClaimResult c,
                         store().Claim(TestId(n), TestFp(n), t0, kTtl, kLock));
    ASSERT_THAT(store().Complete(TestId(n), c.token, RichResponse()), IsOk());
  }
  ASSERT_THAT(store().Claim(TestId(7), TestFp(7), t0, short_ttl, seconds(1)),
              IsOk());
  ASSERT_OK_AND_ASSIGN(ClaimResult c8, store().Claim(TestId(8), TestFp(8), t0,
                                                     short_ttl, seconds(1)));
  ASSERT_THAT(store().Complete(TestId(8), c8.token, RichResponse()), IsOk());

  ASSERT_OK_AND_ASSIGN(std::optional<StoreStats> live, store().Stats(t0));
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ(live->in_progress, 5u);
  EXPECT_EQ(live->completed, 3u);
  EXPECT_EQ(live->expired, 0u);
  EXPECT_EQ(live->damaged, 0u);

  // Exactly at expires_at a record is expired, whatever its state.
  const TimePoint t1 = t0 + short_ttl;
  ASSERT_OK_AND_ASSIGN(std::optional<StoreStats> later, store().Stats(t1));
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(later->in_progress, 4u);
  EXPECT_EQ(later->completed, 2u);
  EXPECT_EQ(later->expired, 2u);

  ASSERT_OK_AND_ASSIGN(std::size_t purged, store().PurgeExpired(t1, 100));
  EXPECT_EQ(purged, 2u);
  ASSERT_OK_AND_ASSIGN(std::optional<StoreStats> swept, store().Stats(t1));
  ASSERT_TRUE(swept.has_value());
  EXPECT_EQ(swept->expired, 0u);
  EXPECT_EQ(swept->in_progress + swept->completed, 6u);
}

}  // namespace idem::testing
