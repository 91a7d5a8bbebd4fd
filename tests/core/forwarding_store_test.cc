// ForwardingStore (forwarding_store.h) passes every Store call through to
// its inner store unchanged: checked over the baseline store by observing
// each call's effect through the inner store itself.

#include "idem/store/forwarding_store.h"

#include <chrono>
#include <cstdint>
#include <memory>

#include <gtest/gtest.h>

#include "baseline/sharded_mutex_store.h"
#include "idem/record_id.h"
#include "idem/types.h"

namespace idem {
namespace {

using std::chrono::seconds;

template <typename IdType>
IdType Filled(std::uint8_t byte) {
  IdType out;
  out.bytes.fill(byte);
  return out;
}
RecordId Id(int n) { return Filled<RecordId>(static_cast<std::uint8_t>(n)); }
Fingerprint Fp() { return Filled<Fingerprint>(0xf7); }

class ForwardingStoreTest : public ::testing::Test {
 protected:
  std::shared_ptr<bench::ShardedMutexStore> inner_ =
      std::make_shared<bench::ShardedMutexStore>();
  ForwardingStore store_{inner_};
  const TimePoint now_{seconds(1000)};
};

TEST_F(ForwardingStoreTest, ClaimAndCompleteReachTheInnerStore) {
  auto claim = store_.Claim(Id(1), Fp(), now_, seconds(60), seconds(5));
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  auto held = inner_->Inspect(Id(1), now_);
  ASSERT_TRUE(held.has_value() && held->has_value());
  EXPECT_EQ((*held)->token, claim->token);

  Response response;
  response.status = 201;
  response.body = "made";
  auto done = store_.Complete(Id(1), claim->token, response);
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(*done);
  auto replay = inner_->Claim(Id(1), Fp(), now_, seconds(60), seconds(5));
  ASSERT_TRUE(replay.has_value());
  ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(*replay->response, response);
}

TEST_F(ForwardingStoreTest, CompleteSharedHandsOverTheSameResponse) {
  auto claim = store_.Claim(Id(2), Fp(), now_, seconds(60), seconds(5));
  ASSERT_TRUE(claim.has_value());
  auto response = std::make_shared<const Response>(Response{.body = "x"});
  auto done = store_.CompleteShared(Id(2), claim->token, response);
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(*done);
  // The baseline keeps the very object; a copy on the way would differ.
  auto record = store_.Inspect(Id(2), now_);
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->response.get(), response.get());
}

TEST_F(ForwardingStoreTest, ReleaseRevokePurgeAndInfoReachTheInnerStore) {
  auto first = store_.Claim(Id(3), Fp(), now_, seconds(60), seconds(5));
  ASSERT_TRUE(first.has_value());
  auto released = store_.Release(Id(3), first->token);
  ASSERT_TRUE(released.has_value());
  EXPECT_TRUE(*released);
  auto gone = inner_->Inspect(Id(3), now_);
  ASSERT_TRUE(gone.has_value());
  EXPECT_FALSE(gone->has_value());

  ASSERT_TRUE(inner_->Claim(Id(4), Fp(), now_, seconds(60), seconds(5)));
  auto revoked = store_.Revoke(Id(4));
  ASSERT_TRUE(revoked.has_value());
  EXPECT_TRUE(*revoked);
  EXPECT_EQ(inner_->SizeForTesting(), 0u);

  ASSERT_TRUE(inner_->Claim(Id(5), Fp(), now_, seconds(10), seconds(5)));
  ASSERT_TRUE(inner_->Claim(Id(6), Fp(), now_, seconds(10), seconds(5)));
  auto purged = store_.PurgeExpired(now_ + seconds(10), 1);
  ASSERT_TRUE(purged.has_value());
  EXPECT_EQ(*purged, 1u);  // The limit reached the inner store too.
  EXPECT_EQ(inner_->SizeForTesting(), 1u);

  EXPECT_EQ(store_.Info().name, inner_->Info().name);
}

TEST_F(ForwardingStoreTest, ExtendLockAndStatsReachTheInnerStore) {
  auto claim = store_.Claim(Id(7), Fp(), now_, seconds(60), seconds(5));
  ASSERT_TRUE(claim.has_value());
  auto renewed =
      store_.ExtendLock(Id(7), claim->token, now_ + seconds(3), seconds(5));
  ASSERT_TRUE(renewed.has_value());
  EXPECT_TRUE(*renewed);
  auto record = inner_->Inspect(Id(7), now_);
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->locked_until, now_ + seconds(8));

  auto stats = store_.Stats(now_);
  ASSERT_TRUE(stats.has_value() && stats->has_value());
  EXPECT_EQ((*stats)->in_progress, 1u);
}

}  // namespace
}  // namespace idem
