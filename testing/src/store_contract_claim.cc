// The store contract's claim table (Store::Claim), row by row, with the
// replay of a completed record's exact response; see store_contract.h.
// Same rules as store_contract.cc: explicit TimePoints from the fixture's
// ManualClock, nothing sleeps, every loop bounded.

#include <chrono>
#include <set>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "idem/token.h"
#include "idem/types.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::ClaimContractAnchor() { return 0; }

namespace {

using contract::ClaimedRecord;
using contract::Describe;
using contract::ExpectSameRecord;
using contract::ExpectSameResponse;
using contract::kLock;
using contract::kTtl;
using contract::Ns;
using contract::RichResponse;
using contract::TestFp;
using contract::TestId;
using std::chrono::hours;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// Every byte value, repeated: catches text-mode encodings and truncation.
Response LargeBinaryResponse() {
  Response r;
  r.status = 200;
  r.headers = {{"Content-Type", "application/octet-stream"}};
  r.body.resize(256 * 1024);
  for (std::size_t i = 0; i < r.body.size(); ++i) {
    r.body[i] = static_cast<char>((i * 7 + i / 256) & 0xFF);
  }
  return r;
}

}  // namespace

TEST_P(StoreContractTest, ClaimOnAbsentIdAcquires) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  EXPECT_EQ(claim.outcome, ClaimOutcome::kAcquired) << Describe(claim);
  EXPECT_FALSE(claim.takeover);
  EXPECT_EQ(Ns(claim.locked_until), Ns(t0 + kLock));
  EXPECT_NE(claim.token, Token{});
  EXPECT_EQ(claim.response, nullptr);

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ExpectSameRecord(record, ClaimedRecord(TestFp(1), claim.token, t0));
}

TEST_P(StoreContractTest, ClaimOnExpiredInProgressRecordAcquiresAfresh) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(first, TestId(1), TestFp(1), t0);

  // Expired means absent: even another fingerprint acquires, and it is not a
  // takeover of the old lock.
  const TimePoint t1 = t0 + kTtl;
  ASSERT_OK_AND_ASSIGN(ClaimResult second,
                       store().Claim(TestId(1), TestFp(2), t1, kTtl, kLock));
  EXPECT_EQ(second.outcome, ClaimOutcome::kAcquired) << Describe(second);
  EXPECT_FALSE(second.takeover);
  EXPECT_NE(second.token, first.token);
  EXPECT_EQ(Ns(second.locked_until), Ns(t1 + kLock));

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, ClaimedRecord(TestFp(2), second.token, t1));

  // Same fingerprint after expiry: also a fresh claim, not a takeover.
  const TimePoint t2 = t1 + kTtl + seconds(1);
  ASSERT_OK_AND_ASSIGN(ClaimResult third,
                       store().Claim(TestId(1), TestFp(2), t2, kTtl, kLock));
  EXPECT_EQ(third.outcome, ClaimOutcome::kAcquired) << Describe(third);
  EXPECT_FALSE(third.takeover);
  EXPECT_NE(third.token, second.token);
}

TEST_P(StoreContractTest, ClaimOnExpiredCompletedRecordAcquires) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_COMPLETE(first, TestId(1), TestFp(1), t0, RichResponse());

  // expires_at <= now is expired: exactly at expires_at the key is free.
  const TimePoint t1 = t0 + kTtl;
  ASSERT_OK_AND_ASSIGN(ClaimResult again,
                       store().Claim(TestId(1), TestFp(3), t1, kTtl, kLock));
  EXPECT_EQ(again.outcome, ClaimOutcome::kAcquired) << Describe(again);
  EXPECT_FALSE(again.takeover);
  EXPECT_EQ(again.response, nullptr);

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, ClaimedRecord(TestFp(3), again.token, t1));
}

TEST_P(StoreContractTest, RecordIsLiveUntilJustBeforeExpiresAt) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_COMPLETE(first, TestId(1), TestFp(1), t0, RichResponse());

  const TimePoint last_live = t0 + kTtl - nanoseconds(1);
  ASSERT_OK_AND_ASSIGN(
      ClaimResult replay,
      store().Claim(TestId(1), TestFp(1), last_live, kTtl, kLock));
  EXPECT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), last_live));
  EXPECT_TRUE(record.has_value());
}

TEST_P(StoreContractTest, OtherFingerprintOnInProgressIsMismatch) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(first, TestId(1), TestFp(1), t0);
  const Record before{.state = RecordState::kInProgress,
                      .fingerprint = TestFp(1),
                      .token = first.token,
                      .locked_until = t0 + kLock,
                      .expires_at = t0 + kTtl};

  ASSERT_OK_AND_ASSIGN(ClaimResult locked,
                       store().Claim(TestId(1), TestFp(2), t0, kTtl, kLock));
  EXPECT_EQ(locked.outcome, ClaimOutcome::kMismatch) << Describe(locked);

  // The fingerprint check comes first: a timed-out lock is not taken over by
  // a different request.
  const TimePoint t1 = t0 + kLock + seconds(1);
  ASSERT_OK_AND_ASSIGN(ClaimResult timed_out,
                       store().Claim(TestId(1), TestFp(2), t1, kTtl, kLock));
  EXPECT_EQ(timed_out.outcome, ClaimOutcome::kMismatch) << Describe(timed_out);

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, before);
}

TEST_P(StoreContractTest, OtherFingerprintOnCompletedIsMismatch) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_COMPLETE(first, TestId(1), TestFp(1), t0, RichResponse());
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());

  const TimePoint t1 = t0 + hours(1);
  ASSERT_OK_AND_ASSIGN(ClaimResult other,
                       store().Claim(TestId(1), TestFp(2), t1, kTtl, kLock));
  EXPECT_EQ(other.outcome, ClaimOutcome::kMismatch) << Describe(other);
  EXPECT_EQ(other.response, nullptr);

  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t1));
  ExpectSameRecord(after, *before);
}

TEST_P(StoreContractTest, CompletedReplaysTheExactResponse) {
  const TimePoint t0 = Now();
  const Response response = RichResponse();
  IDEM_CONTRACT_COMPLETE(first, TestId(1), TestFp(1), t0, response);

  // Every replay gets the same response, also after the lock time passed,
  // and says when the record expires (what a local cache keeps it until).
  for (const TimePoint t : {t0, t0 + kLock, t0 + kTtl - seconds(1)}) {
    ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                         store().Claim(TestId(1), TestFp(1), t, kTtl, kLock));
    ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
    ExpectSameResponse(replay.response, response);
    EXPECT_EQ(replay.expires_at, t0 + kTtl);
  }
}

TEST_P(StoreContractTest, CompletedReplaysAnEmptyResponse) {
  const TimePoint t0 = Now();
  const Response empty{.status = 204, .headers = {}, .body = ""};
  IDEM_CONTRACT_COMPLETE(first, TestId(1), TestFp(1), t0, empty);

  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ExpectSameResponse(replay.response, empty);
}

TEST_P(StoreContractTest, CompletedReplaysALargeBinaryBody) {
  const TimePoint t0 = Now();
  const Response large = LargeBinaryResponse();
  IDEM_CONTRACT_COMPLETE(first, TestId(1), TestFp(1), t0, large);

  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ExpectSameResponse(replay.response, large);
}

TEST_P(StoreContractTest, InProgressWhileLocked) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(first, TestId(1), TestFp(1), t0);
  const Record before{.state = RecordState::kInProgress,
                      .fingerprint = TestFp(1),
                      .token = first.token,
                      .locked_until = t0 + kLock,
                      .expires_at = t0 + kTtl};

  for (const TimePoint t :
       {t0, t0 + seconds(59), t0 + kLock - nanoseconds(1)}) {
    ASSERT_OK_AND_ASSIGN(ClaimResult busy,
                         store().Claim(TestId(1), TestFp(1), t, kTtl, kLock));
    EXPECT_EQ(busy.outcome, ClaimOutcome::kInProgress) << Describe(busy);
    EXPECT_EQ(Ns(busy.locked_until), Ns(t0 + kLock));
    EXPECT_EQ(busy.response, nullptr);
  }
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ExpectSameRecord(record, before);
}

TEST_P(StoreContractTest, TimedOutLockIsTakenOverWithANewToken) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(first, TestId(1), TestFp(1), t0);

  // locked_until <= now: exactly at locked_until the lock has timed out.
  const TimePoint t1 = t0 + kLock;
  ASSERT_OK_AND_ASSIGN(ClaimResult second,
                       store().Claim(TestId(1), TestFp(1), t1, kTtl, kLock));
  EXPECT_EQ(second.outcome, ClaimOutcome::kAcquired) << Describe(second);
  EXPECT_TRUE(second.takeover);
  EXPECT_NE(second.token, first.token);
  EXPECT_EQ(Ns(second.locked_until), Ns(t1 + kLock));

  // expires_at is renewed as for a new record.
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, ClaimedRecord(TestFp(1), second.token, t1));
}

TEST_P(StoreContractTest, OldHolderLosesAfterTakeover) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(old_holder, TestId(1), TestFp(1), t0);

  clock().Advance(seconds(61));
  const TimePoint t1 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult new_holder,
                       store().Claim(TestId(1), TestFp(1), t1, kTtl, kLock));
  ASSERT_EQ(new_holder.outcome, ClaimOutcome::kAcquired)
      << Describe(new_holder);
  ASSERT_TRUE(new_holder.takeover);
  const Record taken{.state = RecordState::kInProgress,
                     .fingerprint = TestFp(1),
                     .token = new_holder.token,
                     .locked_until = t1 + kLock,
                     .expires_at = t1 + kTtl};

  ASSERT_OK_AND_ASSIGN(
      bool stale_complete,
      store().Complete(TestId(1), old_holder.token, RichResponse()));
  EXPECT_FALSE(stale_complete);
  ASSERT_OK_AND_ASSIGN(bool stale_release,
                       store().Release(TestId(1), old_holder.token));
  EXPECT_FALSE(stale_release);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, taken);

  const Response response{.status = 200, .headers = {}, .body = "second"};
  ASSERT_OK_AND_ASSIGN(bool completed,
                       store().Complete(TestId(1), new_holder.token, response));
  EXPECT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), t1, kTtl, kLock));
  ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ExpectSameResponse(replay.response, response);
}

TEST_P(StoreContractTest, LockedUntilIsCappedAtExpiresAt) {
  const TimePoint t0 = Now();
  const Duration short_ttl = seconds(10);
  ASSERT_OK_AND_ASSIGN(ClaimResult first, store().Claim(TestId(1), TestFp(1),
                                                        t0, short_ttl, kLock));
  ASSERT_EQ(first.outcome, ClaimOutcome::kAcquired);
  EXPECT_EQ(Ns(first.locked_until), Ns(t0 + short_ttl));

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ExpectSameRecord(record, Record{.state = RecordState::kInProgress,
                                  .fingerprint = TestFp(1),
                                  .token = first.token,
                                  .locked_until = t0 + short_ttl,
                                  .expires_at = t0 + short_ttl});

  ASSERT_OK_AND_ASSIGN(
      ClaimResult busy,
      store().Claim(TestId(1), TestFp(1), t0 + seconds(9), short_ttl, kLock));
  EXPECT_EQ(busy.outcome, ClaimOutcome::kInProgress) << Describe(busy);
  EXPECT_EQ(Ns(busy.locked_until), Ns(t0 + short_ttl));

  // When the lock ends the record has expired too: a fresh claim.
  ASSERT_OK_AND_ASSIGN(
      ClaimResult after,
      store().Claim(TestId(1), TestFp(1), t0 + short_ttl, short_ttl, kLock));
  EXPECT_EQ(after.outcome, ClaimOutcome::kAcquired) << Describe(after);
  EXPECT_FALSE(after.takeover);
}

TEST_P(StoreContractTest, EveryAcquisitionGetsAFreshToken) {
  const TimePoint t0 = Now();
  std::set<Token> tokens;
  for (int i = 0; i < 100; ++i) {
    const RecordId id = TestId(i % 4);
    IDEM_CONTRACT_ACQUIRE(claim, id, TestFp(1), t0);
    EXPECT_TRUE(tokens.insert(claim.token).second) << "token reused at " << i;
    ASSERT_OK_AND_ASSIGN(bool released, store().Release(id, claim.token));
    ASSERT_TRUE(released);
  }
}

}  // namespace idem::testing
