#include "support/lost_races.h"

#include <chrono>
#include <cstdint>

#include <gtest/gtest.h>

#include "idem/types.h"
#include "support/store_times.h"

namespace idem::testing {
namespace {

using std::chrono::seconds;

template <typename IdType>
IdType Bytes(std::uint8_t fill) {
  IdType out;
  out.bytes.fill(fill);
  return out;
}

const RecordId kId = Bytes<RecordId>(0x1d);
const Fingerprint kHolderFp = Bytes<Fingerprint>(0x02);
const Fingerprint kFp = Bytes<Fingerprint>(0x01);

}  // namespace

void ExpectEveryLostRaceIsInProgress(Store& store,
                                     const SetClaimAttemptHook& set_hook,
                                     int claim_attempts,
                                     const RacingTable& table) {
  // The record in the way: another request's, live and locked.
  auto holder = store.Claim(kId, kHolderFp, kT0, kTtl, kLock);
  ASSERT_TRUE(holder.has_value()) << holder.error().ToString();
  table.save();
  int reads = 0;
  int writes = 0;
  set_hook([&](ClaimAttemptPoint point, int attempt) {
    if (point == ClaimAttemptPoint::kBeforeWrite) {
      ++writes;
      if (attempt > 0) table.restore();
    } else {
      ++reads;
      table.delete_all();
    }
  });
  const TimePoint now = kT0 + seconds(1);
  auto claim = store.Claim(kId, kFp, now, kTtl, kLock);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kInProgress);
  EXPECT_EQ(claim->locked_until, now);  // No holder known: nothing to wait.
  EXPECT_EQ(reads, claim_attempts);
  EXPECT_EQ(writes, claim_attempts);

  // Once the races stop, the next claim acquires the (now absent) key.
  set_hook(nullptr);
  auto next = store.Claim(kId, kFp, now, kTtl, kLock);
  ASSERT_TRUE(next.has_value()) << next.error().ToString();
  EXPECT_EQ(next->outcome, ClaimOutcome::kAcquired);
}

void ExpectOneLostRaceThenAcquires(Store& store,
                                   const SetClaimAttemptHook& set_hook,
                                   const std::function<void()>& delete_all) {
  auto holder = store.Claim(kId, kHolderFp, kT0, kTtl, kLock);
  ASSERT_TRUE(holder.has_value()) << holder.error().ToString();
  int reads = 0;
  set_hook([&](ClaimAttemptPoint point, int) {
    if (point == ClaimAttemptPoint::kBeforeRead && reads++ == 0) delete_all();
  });
  auto claim = store.Claim(kId, kFp, kT0, kTtl, kLock);
  set_hook(nullptr);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  EXPECT_FALSE(claim->takeover);
  EXPECT_EQ(reads, 1);
}

}  // namespace idem::testing
