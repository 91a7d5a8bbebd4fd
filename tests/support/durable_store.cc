#include "support/durable_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/record.h"
#include "support/ids.h"
#include "support/store_times.h"

namespace idem::testing {

using std::chrono::seconds;
using ::testing::HasSubstr;

Response SomeResponse() {
  return Response{.status = 201,
                  .headers = {{"Content-Type", "application/json"},
                              {"Location", "/orders/7"}},
                  .body = std::string("{\"id\":7}\0\xff", 10)};
}

void ExpectReopeningKeepsInProgressAndCompletedRecords(
    const OpenDurableStore& open) {
  Token pending_token;
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    auto pending =
        store->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
    ASSERT_TRUE(pending.has_value()) << pending.error().ToString();
    pending_token = pending->token;
    auto done = store->Claim(TestId(2), TestFingerprint(2), kT0, kTtl, kLock);
    ASSERT_TRUE(done.has_value());
    ASSERT_EQ(store->Complete(TestId(2), done->token, SomeResponse()), true);
  }
  auto store = open();
  ASSERT_NE(store, nullptr);

  auto pending = store->Inspect(TestId(1), kT0);
  ASSERT_TRUE(pending.has_value()) << pending.error().ToString();
  ASSERT_TRUE(pending->has_value());
  EXPECT_EQ((*pending)->state, RecordState::kInProgress);
  EXPECT_EQ((*pending)->token, pending_token);
  EXPECT_EQ((*pending)->locked_until, kT0 + kLock);
  EXPECT_EQ((*pending)->expires_at, kT0 + kTtl);

  auto busy = store->Claim(TestId(1), TestFingerprint(1), kT0 + seconds(1),
                           kTtl, kLock);
  ASSERT_TRUE(busy.has_value());
  EXPECT_EQ(busy->outcome, ClaimOutcome::kInProgress);

  auto replay = store->Claim(TestId(2), TestFingerprint(2), kT0 + seconds(1),
                             kTtl, kLock);
  ASSERT_TRUE(replay.has_value());
  ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  ASSERT_NE(replay->response, nullptr);
  EXPECT_EQ(*replay->response, SomeResponse());

  // The token of the claim from before the restart still completes it.
  EXPECT_EQ(store->Complete(TestId(1), pending_token, SomeResponse()), true);
}

void ExpectDataLossOnEveryCall(Store& store, const RecordId& id,
                               const Token& token, const std::string& path) {
  auto claim = store.Claim(id, TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_FALSE(claim.has_value());
  EXPECT_EQ(claim.error().code(), ErrorCode::kDataLoss);
  EXPECT_THAT(claim.error().message(), HasSubstr(id.ToHex()));
  EXPECT_THAT(claim.error().message(), HasSubstr(path));
  auto inspect = store.Inspect(id, kT0);
  ASSERT_FALSE(inspect.has_value());
  EXPECT_EQ(inspect.error().code(), ErrorCode::kDataLoss);
  auto complete = store.Complete(id, token, SomeResponse());
  ASSERT_FALSE(complete.has_value());
  EXPECT_EQ(complete.error().code(), ErrorCode::kDataLoss);
  auto extend = store.ExtendLock(id, token, kT0, kLock);
  ASSERT_FALSE(extend.has_value());
  EXPECT_EQ(extend.error().code(), ErrorCode::kDataLoss);
}

}  // namespace idem::testing
