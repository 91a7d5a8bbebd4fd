// RunOnce: the programmatic at-most-once API over the same Guard.

#include "idem/once.h"

#include <stdexcept>

#include <gtest/gtest.h>

#include "idem/memory_store.h"

namespace idem {
namespace {

class RunOnceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>();
    auto store = MemoryStore::Open(MemoryStoreOptions{});
    ASSERT_TRUE(store.has_value());
    GuardSetup setup;
    setup.store = std::move(*store);
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
  std::unique_ptr<Guard> guard_;
  int runs_ = 0;
};

TEST_F(RunOnceTest, RunsOnceAndReplaysTheStoredResult) {
  auto first = Charge("msg-1", "42 EUR");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->value, "receipt-1");
  EXPECT_FALSE(first->replayed);
  auto again = Charge("msg-1", "42 EUR");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->value, "receipt-1");
  EXPECT_TRUE(again->replayed);
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

}  // namespace
}  // namespace idem
