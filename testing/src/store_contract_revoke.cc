// The store contract for Revoke, expiry and Inspect; see
// store_contract.h.
// Same rules as store_contract.cc: explicit TimePoints from the fixture's
// ManualClock, nothing sleeps, every loop bounded.

#include <barrier>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "idem/types.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::RevokeContractAnchor() { return 0; }

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
using std::chrono::seconds;

}  // namespace

// ---------------------------------------------------------------------------
// Revoke.

TEST_P(StoreContractTest, RevokeOfACompletedRecordLetsTheNextClaimAcquire) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_COMPLETE(claim, TestId(1), TestFp(1), t0, RichResponse());
  ASSERT_OK_AND_ASSIGN(bool revoked, store().Revoke(TestId(1)));
  EXPECT_TRUE(revoked);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());

  // The same request runs again: a fresh claim, not a replay or takeover.
  ASSERT_OK_AND_ASSIGN(ClaimResult next,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  EXPECT_EQ(next.outcome, ClaimOutcome::kAcquired) << Describe(next);
  EXPECT_FALSE(next.takeover);
  EXPECT_NE(next.token, claim.token);
  // Other ids are untouched.
  ASSERT_OK_AND_ASSIGN(bool other, store().Revoke(TestId(2)));
  EXPECT_FALSE(other);
}

TEST_P(StoreContractTest, RevokeOfAnInProgressRecordFencesItsHolder) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(holder, TestId(1), TestFp(1), t0);
  ASSERT_OK_AND_ASSIGN(bool revoked, store().Revoke(TestId(1)));
  EXPECT_TRUE(revoked);

  // The lock is gone with the record: the next claim acquires at once,
  // with another fingerprint too, and is not a takeover.
  ASSERT_OK_AND_ASSIGN(ClaimResult next,
                       store().Claim(TestId(1), TestFp(2), t0, kTtl, kLock));
  EXPECT_EQ(next.outcome, ClaimOutcome::kAcquired) << Describe(next);
  EXPECT_FALSE(next.takeover);

  // The revoked holder's late calls lose, and change nothing.
  ASSERT_OK_AND_ASSIGN(bool completed, store().Complete(TestId(1), holder.token,
                                                        RichResponse()));
  EXPECT_FALSE(completed);
  ASSERT_OK_AND_ASSIGN(bool released, store().Release(TestId(1), holder.token));
  EXPECT_FALSE(released);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, RecordState::kInProgress);
  EXPECT_EQ(record->token, next.token);
  EXPECT_EQ(record->fingerprint, TestFp(2));
}

TEST_P(StoreContractTest, RevokeRightAfterTheClaimMakesCompleteReturnFalse) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult holder,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool revoked, store().Revoke(TestId(1)));
  ASSERT_TRUE(revoked);
  // No claim in between: the Complete must not resurrect the record.
  ASSERT_OK_AND_ASSIGN(
      bool completed,
      store().CompleteShared(TestId(1), holder.token,
                             std::make_shared<const Response>(RichResponse())));
  EXPECT_FALSE(completed);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());
}

TEST_P(StoreContractTest, RevokeOfAnAbsentIdReturnsFalse) {
  ASSERT_OK_AND_ASSIGN(bool revoked, store().Revoke(TestId(1)));
  EXPECT_FALSE(revoked);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), Now()));
  EXPECT_FALSE(record.has_value());
  // Twice in a row: the second finds nothing.
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), Now(), kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool first, store().Revoke(TestId(1)));
  EXPECT_TRUE(first);
  ASSERT_OK_AND_ASSIGN(bool second, store().Revoke(TestId(1)));
  EXPECT_FALSE(second);
}

TEST_P(StoreContractTest, RevokeDeletesAnExpiredRecordToo) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(
      ClaimResult claim,
      store().Claim(TestId(1), TestFp(1), t0, seconds(10), kLock));
  ASSERT_OK_AND_ASSIGN(bool revoked, store().Revoke(TestId(1)));
  EXPECT_TRUE(revoked);
  // Nothing is left for PurgeExpired.
  ASSERT_OK_AND_ASSIGN(std::size_t purged,
                       store().PurgeExpired(t0 + seconds(10), 100));
  EXPECT_EQ(purged, 0u);
}

// Claims racing revokes of their id: every claim answers one of the claim
// table's outcomes (a lost race is kInProgress), never an error.
TEST_P(StoreContractTest, ClaimsRacingRevokesNeverFail) {
  constexpr int kClaimers = 6;
  constexpr int kRevokers = 2;
  constexpr int kRounds = 40;
  std::barrier start(kClaimers + kRevokers);
  std::vector<std::string> errors(kClaimers + kRevokers);
  std::vector<std::thread> threads;
  const TimePoint t0 = Now();
  for (int t = 0; t < kClaimers + kRevokers; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int round = 0; round < kRounds && errors[t].empty(); ++round) {
        if (t >= kClaimers) {
          auto revoked = store().Revoke(TestId(1));
          if (!revoked) errors[t] = revoked.error().ToString();
          continue;
        }
        auto claim = store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock);
        if (!claim) {
          errors[t] = "claim: " + claim.error().ToString();
        } else if (claim->outcome == ClaimOutcome::kMismatch) {
          errors[t] = "claim: mismatch for one fingerprint";
        } else if (claim->outcome == ClaimOutcome::kInProgress &&
                   claim->locked_until < t0) {
          // A holder's lock, or `now` for a lost race (store.h).
          errors[t] = "claim: in progress with locked_until before now";
        } else if (claim->outcome == ClaimOutcome::kAcquired &&
                   round % 2 == 0) {
          auto done = store().Complete(TestId(1), claim->token, RichResponse());
          if (!done) errors[t] = "complete: " + done.error().ToString();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kClaimers + kRevokers; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
  }
}

// ---------------------------------------------------------------------------
// Expiry and Inspect.

TEST_P(StoreContractTest, RecordsExpireAsTheClockPassesTtl) {
  const Duration ttl = hours(1);
  ASSERT_OK_AND_ASSIGN(ClaimResult completed_claim,
                       store().Claim(TestId(1), TestFp(1), Now(), ttl, kLock));
  ASSERT_OK_AND_ASSIGN(
      bool completed,
      store().Complete(TestId(1), completed_claim.token, RichResponse()));
  ASSERT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(ClaimResult pending,
                       store().Claim(TestId(2), TestFp(1), Now(), ttl, kLock));
  ASSERT_EQ(pending.outcome, ClaimOutcome::kAcquired);

  clock().Advance(ttl + seconds(1));
  for (const RecordId& id : {TestId(1), TestId(2)}) {
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(id, Now()));
    EXPECT_FALSE(record.has_value()) << Describe(*record);
    ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                         store().Claim(id, TestFp(1), Now(), ttl, kLock));
    EXPECT_EQ(claim.outcome, ClaimOutcome::kAcquired) << Describe(claim);
    EXPECT_FALSE(claim.takeover);
  }

  // The holder of the expired claim has lost it.
  ASSERT_OK_AND_ASSIGN(
      bool stale, store().Complete(TestId(2), pending.token, RichResponse()));
  EXPECT_FALSE(stale);
}

TEST_P(StoreContractTest, InspectOfAnAbsentIdIsEmpty) {
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), Now()));
  EXPECT_FALSE(record.has_value());
}

TEST_P(StoreContractTest, InspectReturnsTheFullRecord) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(7), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(auto pending, store().Inspect(TestId(1), t0));
  ExpectSameRecord(pending, ClaimedRecord(TestFp(7), claim.token, t0));

  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), claim.token, RichResponse()));
  ASSERT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(auto done, store().Inspect(TestId(1), t0 + seconds(1)));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->state, RecordState::kCompleted);
  EXPECT_EQ(done->fingerprint, TestFp(7));
  EXPECT_EQ(Ns(done->expires_at), Ns(t0 + kTtl));
  ExpectSameResponse(done->response, RichResponse());
  // Inspect is a read: it changes nothing.
  ASSERT_OK_AND_ASSIGN(auto again, store().Inspect(TestId(1), t0 + seconds(1)));
  ExpectSameRecord(again, *done);
}

TEST_P(StoreContractTest, IdsAreIndependent) {
  const TimePoint t0 = Now();
  // Ids that differ in one byte only, at either end.
  RecordId base = TestId(1);
  RecordId last_byte = base;
  last_byte.bytes[31] ^= 1;
  RecordId first_byte = base;
  first_byte.bytes[0] ^= 1;

  IDEM_CONTRACT_COMPLETE(a, base, TestFp(1), t0, RichResponse());
  for (const RecordId& id : {last_byte, first_byte}) {
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(id, t0));
    EXPECT_FALSE(record.has_value());
    ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                         store().Claim(id, TestFp(2), t0, kTtl, kLock));
    EXPECT_EQ(claim.outcome, ClaimOutcome::kAcquired) << Describe(claim);
    ASSERT_OK_AND_ASSIGN(bool released, store().Release(id, claim.token));
    EXPECT_TRUE(released);
  }
  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(base, TestFp(1), t0, kTtl, kLock));
  EXPECT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
}

}  // namespace idem::testing
