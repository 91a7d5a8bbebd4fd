// The store contract's rows on arguments and Info: a claim with a ttl or lock
// timeout that is not positive is kInvalidArgument and changes nothing; every
// store names its backend. See store_contract.h. Same rules as
// store_contract.cc: explicit TimePoints from the fixture's ManualClock,
// nothing sleeps.

#include <chrono>

#include "idem/record.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "idem/types.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::ArgumentsContractAnchor() { return 0; }

namespace {

using contract::Describe;
using contract::ExpectSameRecord;
using contract::kLock;
using contract::kTtl;
using contract::TestFp;
using contract::TestId;
using std::chrono::nanoseconds;

}  // namespace

TEST_P(StoreContractTest, NonPositiveTtlOrLockTimeoutIsInvalidArgument) {
  const TimePoint t0 = Now();
  const struct {
    Duration ttl;
    Duration lock_timeout;
  } cases[] = {{Duration::zero(), kLock},
               {-nanoseconds(1), kLock},
               {-kTtl, kLock},
               {kTtl, Duration::zero()},
               {kTtl, -nanoseconds(1)},
               {Duration::zero(), Duration::zero()}};
  for (const auto& c : cases) {
    auto claim = store().Claim(TestId(1), TestFp(1), t0, c.ttl, c.lock_timeout);
    ASSERT_FALSE(claim.has_value()) << Describe(*claim);
    EXPECT_THAT(claim, HasErrorCode(ErrorCode::kInvalidArgument));
  }
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());

  // A rejected call leaves an existing record alone too.
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));
  auto rejected =
      store().Claim(TestId(1), TestFp(1), t0 + kLock, Duration::zero(), kLock);
  ASSERT_THAT(rejected, HasErrorCode(ErrorCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);
}

TEST_P(StoreContractTest, InfoNamesTheBackend) {
  EXPECT_FALSE(store().Info().name.empty());
}

}  // namespace idem::testing
