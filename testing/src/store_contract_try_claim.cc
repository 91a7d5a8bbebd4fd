// The store contract for Store::TryClaimWithoutBlocking; see
// store_contract.h. A store may answer none of these (nullopt: the caller
// makes the Claim), but what it answers must be exactly Claim's answer,
// with Claim's effect, and a nullopt must change nothing. Only stores that
// answer some claims from memory (a local cache's hits) exercise the
// answers; every store runs the rows. Same rules as store_contract.cc.

#include <chrono>
#include <optional>
#include <string>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::TryClaimContractAnchor() { return 0; }

namespace {

using contract::Describe;
using contract::ExpectSameRecord;
using contract::ExpectSameResponse;
using contract::kLock;
using contract::kTtl;
using contract::RichResponse;
using contract::TestFp;
using contract::TestId;
using std::chrono::seconds;

}  // namespace

TEST_P(StoreContractTest, TryClaimOfACompletedRecordReplaysOrDefers) {
  const TimePoint t0 = Now();
  const Response response = RichResponse();
  IDEM_CONTRACT_COMPLETE(first, TestId(1), TestFp(1), t0, response);
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));

  for (const TimePoint t : {t0, t0 + kLock}) {
    auto same =
        store().TryClaimWithoutBlocking(TestId(1), TestFp(1), t, kTtl, kLock);
    if (same) {
      ASSERT_TRUE(same->has_value()) << same->error().ToString();
      ASSERT_EQ((*same)->outcome, ClaimOutcome::kCompleted) << Describe(**same);
      ExpectSameResponse((*same)->response, response);
    }
    auto other =
        store().TryClaimWithoutBlocking(TestId(1), TestFp(2), t, kTtl, kLock);
    if (other) {
      ASSERT_TRUE(other->has_value()) << other->error().ToString();
      EXPECT_EQ((*other)->outcome, ClaimOutcome::kMismatch)
          << Describe(**other);
    }
  }
  // Neither an answer nor a deferral changed the record.
  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);
}

TEST_P(StoreContractTest, TryClaimOfAnExpiredRecordIsNoReplay) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_COMPLETE(first, TestId(1), TestFp(1), t0, RichResponse());
  // At expires_at the record is gone for Claim: never replayed from memory.
  auto late = store().TryClaimWithoutBlocking(TestId(1), TestFp(1), t0 + kTtl,
                                              kTtl, kLock);
  if (late) {
    ASSERT_TRUE(late->has_value()) << late->error().ToString();
    EXPECT_EQ((*late)->outcome, ClaimOutcome::kAcquired) << Describe(**late);
  }
}

TEST_P(StoreContractTest, TryClaimOfAnInProgressOrAbsentRecordIsClaims) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult first,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  auto waiting = store().TryClaimWithoutBlocking(TestId(1), TestFp(1),
                                                 t0 + seconds(1), kTtl, kLock);
  if (waiting) {
    ASSERT_TRUE(waiting->has_value()) << waiting->error().ToString();
    EXPECT_EQ((*waiting)->outcome, ClaimOutcome::kInProgress)
        << Describe(**waiting);
  }
  // The holder still holds it: whatever the try did, it took nothing over.
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), first.token, RichResponse()));
  EXPECT_TRUE(completed);

  auto fresh =
      store().TryClaimWithoutBlocking(TestId(2), TestFp(1), t0, kTtl, kLock);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(2), t0));
  if (fresh) {
    ASSERT_TRUE(fresh->has_value()) << fresh->error().ToString();
    ASSERT_EQ((*fresh)->outcome, ClaimOutcome::kAcquired) << Describe(**fresh);
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->token, (*fresh)->token);
  } else {
    EXPECT_FALSE(record.has_value()) << "a deferred try wrote a record";
  }
}

TEST_P(StoreContractTest, TryClaimChecksItsArgumentsAsClaimDoes) {
  auto bad = store().TryClaimWithoutBlocking(TestId(1), TestFp(1), Now(),
                                             Duration::zero(), kLock);
  if (bad) {
    ASSERT_FALSE(bad->has_value());
    EXPECT_EQ(bad->error().code(), ErrorCode::kInvalidArgument);
  }
}

}  // namespace idem::testing
