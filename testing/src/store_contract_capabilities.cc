// The rows of the store contract that only some stores' capabilities
// allow (StoreInfo::durable, StoreInfo::shared_across_processes): each
// skips, naming the capability, on a store that lacks it. Both reopen the
// test's store through its factory (StoreContractTest::OpenAgain). Same
// rules as store_contract.cc: explicit TimePoints, no sleeps.

#include <memory>
#include <optional>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::CapabilityContractAnchor() { return 0; }

namespace {

using contract::Describe;
using contract::ExpectSameRecord;
using contract::ExpectSameResponse;
using contract::kLock;
using contract::kTtl;
using contract::RichResponse;
using contract::TestFp;
using contract::TestId;

constexpr const char* kNeedsReopen =
    "needs a factory that takes a StoreTestContext (to open the test's "
    "store again)";

}  // namespace

// durable: what a store holds outlives the store object; a completed
// record replays after a reopen, an in-progress one keeps its holder.
TEST_P(StoreContractTest, DurableStoreKeepsRecordsAcrossReopening) {
  if (!store().Info().durable) {
    GTEST_SKIP() << "needs the capability StoreInfo::durable (this store "
                    "says false)";
  }
  if (!GetParam().reopens) GTEST_SKIP() << kNeedsReopen;
  const TimePoint t0 = Now();
  IDEM_CONTRACT_COMPLETE(done, TestId(1), TestFp(1), t0, RichResponse());
  ASSERT_OK_AND_ASSIGN(ClaimResult held,
                       store().Claim(TestId(2), TestFp(2), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(std::optional<Record> held_before,
                       store().Inspect(TestId(2), t0));
  ASSERT_TRUE(held_before.has_value());

  CloseStore();
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<Store> reopened, OpenAgain());
  UseStore(reopened);

  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ExpectSameResponse(replay.response, RichResponse());
  ASSERT_OK_AND_ASSIGN(std::optional<Record> held_after,
                       store().Inspect(TestId(2), t0));
  ExpectSameRecord(held_after, *held_before);
  // The holder from before the reopen still completes its claim.
  ASSERT_OK_AND_ASSIGN(bool held_completed,
                       store().Complete(TestId(2), held.token, Response{}));
  EXPECT_TRUE(held_completed);
}

// shared_across_processes: two store objects on one place are one store;
// a claim made through one is held, completed and replayed through the
// other.
TEST_P(StoreContractTest, SharedStoreIsOneStoreThroughTwoObjects) {
  if (!store().Info().shared_across_processes) {
    GTEST_SKIP() << "needs the capability StoreInfo::shared_across_processes "
                    "(this store says false)";
  }
  if (!GetParam().reopens) GTEST_SKIP() << kNeedsReopen;
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<Store> other, OpenAgain());
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult first,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_EQ(first.outcome, ClaimOutcome::kAcquired) << Describe(first);

  ASSERT_OK_AND_ASSIGN(ClaimResult seen,
                       other->Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  EXPECT_EQ(seen.outcome, ClaimOutcome::kInProgress) << Describe(seen);
  EXPECT_EQ(seen.locked_until, first.locked_until);
  ASSERT_OK_AND_ASSIGN(ClaimResult mismatch,
                       other->Claim(TestId(1), TestFp(2), t0, kTtl, kLock));
  EXPECT_EQ(mismatch.outcome, ClaimOutcome::kMismatch) << Describe(mismatch);

  ASSERT_OK_AND_ASSIGN(bool completed,
                       other->Complete(TestId(1), first.token, RichResponse()));
  EXPECT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ExpectSameResponse(replay.response, RichResponse());
}

}  // namespace idem::testing
