// The store contract for Complete, CompleteShared and Release: only the
// token of the current claim changes a record; see store_contract.h.
// Same rules as store_contract.cc: explicit TimePoints from the fixture's
// ManualClock, nothing sleeps, every loop bounded.

#include <chrono>
#include <memory>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "idem/types.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::CompleteContractAnchor() { return 0; }

namespace {

using contract::Describe;
using contract::ExpectSameRecord;
using contract::ExpectSameResponse;
using contract::ForeignToken;
using contract::kLock;
using contract::kTtl;
using contract::Ns;
using contract::RichResponse;
using contract::TestFp;
using contract::TestId;
using std::chrono::nanoseconds;
using std::chrono::seconds;

}  // namespace

// ---------------------------------------------------------------------------
// Complete.

TEST_P(StoreContractTest, CompleteStoresTheResponseAndKeepsExpiresAt) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  clock().Advance(seconds(30));
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), claim.token, RichResponse()));
  EXPECT_TRUE(completed);

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), Now()));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, RecordState::kCompleted);
  EXPECT_EQ(record->fingerprint, TestFp(1));
  EXPECT_EQ(Ns(record->expires_at), Ns(t0 + kTtl));
  ExpectSameResponse(record->response, RichResponse());

  // Still there one tick before the original expiry, gone at it.
  ASSERT_OK_AND_ASSIGN(auto last,
                       store().Inspect(TestId(1), t0 + kTtl - nanoseconds(1)));
  EXPECT_TRUE(last.has_value());
  ASSERT_OK_AND_ASSIGN(auto gone, store().Inspect(TestId(1), t0 + kTtl));
  EXPECT_FALSE(gone.has_value());
}

// The Guard completes through CompleteShared; it follows Complete's contract
// whether the store keeps the object or copies it.
TEST_P(StoreContractTest, CompleteSharedFollowsTheCompleteContract) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  auto response = std::make_shared<const Response>(RichResponse());
  ASSERT_OK_AND_ASSIGN(
      bool wrong, store().CompleteShared(TestId(1), ForeignToken(1), response));
  EXPECT_FALSE(wrong);
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().CompleteShared(TestId(1), claim.token, response));
  EXPECT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(
      bool again, store().CompleteShared(TestId(1), claim.token, response));
  EXPECT_FALSE(again);
  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), Now(), kTtl, kLock));
  EXPECT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ExpectSameResponse(replay.response, RichResponse());
}

TEST_P(StoreContractTest, CompleteWithAWrongTokenChangesNothing) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));

  ASSERT_OK_AND_ASSIGN(
      bool completed,
      store().Complete(TestId(1), ForeignToken(1), RichResponse()));
  EXPECT_FALSE(completed);
  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);

  // The right token on the wrong id is a wrong token too.
  ASSERT_OK_AND_ASSIGN(ClaimResult other,
                       store().Claim(TestId(2), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(
      bool crossed, store().Complete(TestId(2), claim.token, RichResponse()));
  EXPECT_FALSE(crossed);
  ASSERT_OK_AND_ASSIGN(auto other_record, store().Inspect(TestId(2), t0));
  ASSERT_TRUE(other_record.has_value());
  EXPECT_EQ(other_record->state, RecordState::kInProgress);
  EXPECT_EQ(other_record->token, other.token);
}

TEST_P(StoreContractTest, CompleteOnAnAbsentIdReturnsFalseAndCreatesNothing) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(
      bool completed,
      store().Complete(TestId(1), ForeignToken(1), RichResponse()));
  EXPECT_FALSE(completed);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(2), t0, kTtl, kLock));
  EXPECT_EQ(claim.outcome, ClaimOutcome::kAcquired) << Describe(claim);
}

TEST_P(StoreContractTest, CompleteOnACompletedRecordReturnsFalse) {
  const TimePoint t0 = Now();
  const Response first_response{.status = 201, .headers = {}, .body = "first"};
  IDEM_CONTRACT_COMPLETE(claim, TestId(1), TestFp(1), t0, first_response);
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));

  const Response second_response{
      .status = 500, .headers = {{"A", "b"}}, .body = "second"};
  ASSERT_OK_AND_ASSIGN(
      bool again, store().Complete(TestId(1), claim.token, second_response));
  EXPECT_FALSE(again);
  ASSERT_OK_AND_ASSIGN(
      bool foreign,
      store().Complete(TestId(1), ForeignToken(1), second_response));
  EXPECT_FALSE(foreign);

  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);
  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted);
  ExpectSameResponse(replay.response, first_response);
}

TEST_P(StoreContractTest, CompleteAfterReleaseReturnsFalse) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool released, store().Release(TestId(1), claim.token));
  ASSERT_TRUE(released);
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), claim.token, RichResponse()));
  EXPECT_FALSE(completed);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());
}

// ---------------------------------------------------------------------------
// Release.

TEST_P(StoreContractTest, ReleaseDeletesTheRecord) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool released, store().Release(TestId(1), claim.token));
  EXPECT_TRUE(released);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());

  // Nothing is left behind: another fingerprint acquires, no takeover.
  ASSERT_OK_AND_ASSIGN(ClaimResult next,
                       store().Claim(TestId(1), TestFp(2), t0, kTtl, kLock));
  EXPECT_EQ(next.outcome, ClaimOutcome::kAcquired) << Describe(next);
  EXPECT_FALSE(next.takeover);
  EXPECT_NE(next.token, claim.token);
}

TEST_P(StoreContractTest, ReleaseWithAWrongTokenChangesNothing) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));
  ASSERT_OK_AND_ASSIGN(bool released,
                       store().Release(TestId(1), ForeignToken(1)));
  EXPECT_FALSE(released);
  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);
  ASSERT_OK_AND_ASSIGN(bool crossed, store().Release(TestId(2), claim.token));
  EXPECT_FALSE(crossed);
}

TEST_P(StoreContractTest, ReleaseOnAnAbsentIdReturnsFalse) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(bool released,
                       store().Release(TestId(1), ForeignToken(1)));
  EXPECT_FALSE(released);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());
}

TEST_P(StoreContractTest, ReleaseOnACompletedRecordReturnsFalse) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_COMPLETE(claim, TestId(1), TestFp(1), t0, RichResponse());
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));

  ASSERT_OK_AND_ASSIGN(bool released, store().Release(TestId(1), claim.token));
  EXPECT_FALSE(released);
  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);
}

TEST_P(StoreContractTest, SecondReleaseReturnsFalse) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool first, store().Release(TestId(1), claim.token));
  EXPECT_TRUE(first);
  ASSERT_OK_AND_ASSIGN(bool second, store().Release(TestId(1), claim.token));
  EXPECT_FALSE(second);

  // Nor does a stale token release a later holder's claim.
  IDEM_CONTRACT_ACQUIRE(next, TestId(1), TestFp(1), t0);
  ASSERT_OK_AND_ASSIGN(bool stale, store().Release(TestId(1), claim.token));
  EXPECT_FALSE(stale);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->token, next.token);
}

}  // namespace idem::testing
