// RunOnce: the programmatic at-most-once API over the same Guard.

#include "idem/once.h"

#include <stdexcept>

#include <gtest/gtest.h>

#include "baseline/sharded_mutex_store.h"
#include "support/faulty_store.h"

namespace idem {
namespace {

class RunOnceTest : public ::testing::Test {
 protected:
  void SetUp() override { Rebuild(GuardOptions{}); }

  void Rebuild(GuardOptions options) {
    clock_ = std::make_shared<ManualClock>();
    store_ = std::make_shared<testing::FaultyStore>(
        std::make_shared<bench::ShardedMutexStore>());
    GuardSetup setup;
    setup.store = store_;
    setup.options = std::move(options);
    setup.clock = clock_;
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard.has_value());
    guard_ = std::move(*guard);
  }

  Result<OnceResult> Charge(std::string_view key, std::string_view input,
                            bool fail = false) {
    return RunOnce(*guard_, "billing", key, "charge", input, [&] {
      ++runs_;
      if (fail) throw std::runtime_error("card declined");
      return "receipt-" + std::to_string(runs_);
    });
  }

  std::shared_ptr<ManualClock> clock_;
  std::shared_ptr<testing::FaultyStore> store_;
  std::unique_ptr<Guard> guard_;
  int runs_ = 0;
};

TEST_F(RunOnceTest, RunsOnceAndReplaysTheStoredResult) {
  auto first = Charge("msg-1", "42 EUR");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->value, "receipt-1");
  EXPECT_FALSE(first->replayed);
  EXPECT_EQ(first->storage, OnceStorage::kStored);
  EXPECT_TRUE(first->stored());
  auto again = Charge("msg-1", "42 EUR");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->value, "receipt-1");
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->storage, OnceStorage::kReplayed);
  EXPECT_TRUE(again->stored());
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(guard_->metrics().Get(Outcome::kReplayed), 1u);
}

TEST_F(RunOnceTest, OtherInputWithTheSameKeyIsAnError) {
  ASSERT_TRUE(Charge("msg-1", "42 EUR").has_value());
  auto other = Charge("msg-1", "43 EUR");
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(runs_, 1);
}

TEST_F(RunOnceTest, ExceptionReleasesTheKeyAndPropagates) {
  EXPECT_THROW(Charge("msg-1", "42 EUR", /*fail=*/true), std::runtime_error);
  auto retry = Charge("msg-1", "42 EUR");
  ASSERT_TRUE(retry.has_value());
  EXPECT_FALSE(retry->replayed);
  EXPECT_EQ(runs_, 2);
}

TEST_F(RunOnceTest, InProgressIsUnavailable) {
  Decision held = guard_->BeginWithKey("billing", "msg-1", "charge", "42 EUR");
  ASSERT_EQ(held.action, Action::kExecute);
  auto second = Charge("msg-1", "42 EUR");
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(runs_, 0);
}

TEST_F(RunOnceTest, BadKeysAreInvalidArguments) {
  auto empty = Charge("", "42 EUR");
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().code(), ErrorCode::kInvalidArgument);
  auto too_long = Charge(std::string(256, 'k'), "42 EUR");
  ASSERT_FALSE(too_long.has_value());
  EXPECT_EQ(too_long.error().code(), ErrorCode::kInvalidArgument);
  // Server-derived keys may hold any bytes.
  auto binary = Charge(std::string("\0\x01\xff", 3), "42 EUR");
  ASSERT_TRUE(binary.has_value());
  EXPECT_EQ(runs_, 1);
}

// A result that is not stored is reported, never silently re-run.
TEST_F(RunOnceTest, AResultOverMaxStoredResponseSaysItIsNotStored) {
  GuardOptions o;
  o.max_stored_response = 4;  // "receipt-1" is 9 bytes.
  Rebuild(o);
  auto first = Charge("msg-1", "42 EUR");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->value, "receipt-1");
  EXPECT_EQ(first->storage, OnceStorage::kTooLarge);
  EXPECT_FALSE(first->stored());
  auto again = Charge("msg-1", "42 EUR");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->storage, OnceStorage::kTooLarge);
  EXPECT_EQ(runs_, 2);
}

TEST_F(RunOnceTest, AFailedCompleteSaysItIsNotStored) {
  store_->fail_complete = ErrorCode::kUnavailable;
  auto first = Charge("msg-1", "42 EUR");
  store_->fail_complete = std::nullopt;
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->storage, OnceStorage::kStoreFailed);
  EXPECT_FALSE(first->stored());
  // Until the lock times out a repeat is told to wait, not run.
  auto again = Charge("msg-1", "42 EUR");
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(runs_, 1);
}

TEST_F(RunOnceTest, AStaleCompleteSaysItIsNotStored) {
  auto result = RunOnce(*guard_, "billing", "msg-1", "charge", "42 EUR", [&] {
    ++runs_;
    clock_->Advance(std::chrono::seconds(61));  // Past the lock timeout.
    Decision other =
        guard_->BeginWithKey("billing", "msg-1", "charge", "42 EUR");
    EXPECT_EQ(other.action, Action::kExecute);
    Response theirs;
    theirs.body = "theirs";
    EXPECT_EQ(other.claim.Finish(theirs), FinishResult::kStored);
    return std::string("mine");
  });
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->value, "mine");
  EXPECT_EQ(result->storage, OnceStorage::kStaleComplete);
  EXPECT_FALSE(result->stored());
  auto again = Charge("msg-1", "42 EUR");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->value, "theirs");
}

TEST_F(RunOnceTest, FailOpenSaysItIsNotStored) {
  GuardOptions o;
  o.on_store_error = StoreErrorPolicy::kFailOpen;
  Rebuild(o);
  store_->fail_claim = ErrorCode::kUnavailable;
  auto first = Charge("msg-1", "42 EUR");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->storage, OnceStorage::kFailOpen);
  EXPECT_FALSE(first->stored());
}

TEST_F(RunOnceTest, AnUnstoredStatusSaysItIsNotStored) {
  GuardOptions o;
  o.stored_statuses = StatusSet().Add(201);
  auto route = Guard::MakeRouteOptions(o);
  ASSERT_TRUE(route.has_value());
  auto first = RunOnce(
      *guard_, "billing", "msg-1", "charge", "42 EUR",
      [&] { return std::to_string(++runs_); }, *route);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->storage, OnceStorage::kStatusNotStored);
}

TEST_F(RunOnceTest, ADamagedRecordIsDataLossAndInvalidRoutesAreRefused) {
  store_->fail_claim = ErrorCode::kDataLoss;
  auto damaged = Charge("msg-1", "42 EUR");
  store_->fail_claim = std::nullopt;
  ASSERT_FALSE(damaged.has_value());
  EXPECT_EQ(damaged.error().code(), ErrorCode::kDataLoss);
  auto bad = std::make_shared<GuardOptions>();
  bad->lock_timeout = Duration::zero();
  auto refused = RunOnce(
      *guard_, "billing", "msg-2", "charge", "42 EUR",
      [&] { return std::to_string(++runs_); }, bad);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(store_->claims, 1);
}

}  // namespace
}  // namespace idem
