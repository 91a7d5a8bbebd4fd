// SqlOnceTest: sql::RunOnceInTransaction on every SQL backend. The job's
// row and its record's completion commit together, a repeat replays without
// running the work, a takeover makes the first run roll back (kAborted), a
// throw rolls back and releases, and a value over max_stored_response
// commits alone.

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "backends/sql/sql_transaction_suite.h"
#include "idem/sql_once.h"
#include "support/hooked_transaction.h"

namespace idem::testing {

void SqlOnceFixture::SetUp() {
  OpenBackend("charges", "id TEXT");
  if (HasFatalFailure() || IsSkipped()) return;
  Rebuild(GuardOptions{});
}

void SqlOnceFixture::TearDown() {
  guard_.reset();  // The Guard's store goes before the backend's cleanup.
  SqlFixture::TearDown();
}

void SqlOnceFixture::Rebuild(GuardOptions options) {
  options.lock_timeout = kLock;
  GuardSetup setup;
  setup.store = backend().store();
  setup.clock = clock_;
  setup.options = std::move(options);
  auto guard = Guard::Create(std::move(setup));
  ASSERT_TRUE(guard);
  guard_ = std::move(*guard);
}

Result<OnceResult> SqlOnceFixture::Charge(std::function<void()> takeover,
                                          bool fail) {
  const bool while_open = backend().takeover_while_open();
  // The backend's transaction, with the takeover before its BEGIN.
  const std::unique_ptr<AnySqlTransaction> inner = backend().Transaction();
  HookedTransaction<AnySqlTransaction> tx(*inner,
                                          while_open ? nullptr : takeover);
  return sql::RunOnceInTransaction(
      *guard_, tx, "billing", "msg-1", "charge", "42 EUR",
      [&](HookedTransaction<AnySqlTransaction>&) {
        ++runs_;
        backend().Exec("INSERT INTO " + backend().table() + " VALUES ('c')");
        if (while_open && takeover) takeover();
        if (fail) throw std::runtime_error("declined");
        return "receipt-" + std::to_string(runs_);
      });
}

namespace {

using std::chrono::seconds;

TEST_P(SqlOnceTest, CommittedIsStoredAndARepeatReplaysWithoutTheWork) {
  auto first = Charge();
  ASSERT_TRUE(first) << first.error().ToString();
  EXPECT_EQ(first->value, "receipt-1");
  EXPECT_EQ(first->storage, OnceStorage::kStored);
  EXPECT_EQ(Rows(), 1);
  EXPECT_EQ(guard_->metrics().Get(Outcome::kStaleComplete), 0u);
  auto again = Charge();
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->value, "receipt-1");
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(Rows(), 1);
}

TEST_P(SqlOnceTest, TakeoverRollsTheFirstRunBackAsAborted) {
  Decision other;
  auto lost = Charge([&] {
    // The work is slow: its lock times out and another run takes the key
    // over, while this run holds its transaction (or is about to begin it).
    clock_->Advance(kLock + seconds(1));
    other = guard_->BeginWithKey("billing", "msg-1", "charge", "42 EUR");
    ASSERT_EQ(other.action, Action::kExecute);
    EXPECT_TRUE(other.claim.takeover());
  });
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code(), ErrorCode::kAborted);
  EXPECT_FALSE(backend().InTransaction());
  EXPECT_EQ(Rows(), 0);
  EXPECT_EQ(guard_->metrics().Get(Outcome::kStaleComplete), 1u);
  // The run that took over finishes; a retry gets its result.
  Response theirs;
  theirs.body = "theirs";
  EXPECT_EQ(other.claim.Finish(theirs), FinishResult::kStored);
  auto retry = Charge();
  ASSERT_TRUE(retry) << retry.error().ToString();
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->value, "theirs");
  EXPECT_EQ(runs_, 1);
}

TEST_P(SqlOnceTest, WorkThatThrowsRollsBackAndReleases) {
  EXPECT_THROW(Charge({}, /*fail=*/true), std::runtime_error);
  EXPECT_FALSE(backend().InTransaction());
  EXPECT_EQ(Rows(), 0);
  auto retry = Charge();
  ASSERT_TRUE(retry) << retry.error().ToString();
  EXPECT_EQ(retry->storage, OnceStorage::kStored);
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Rows(), 1);
}

TEST_P(SqlOnceTest, AValueOverMaxStoredResponseCommitsAlone) {
  GuardOptions o;
  o.max_stored_response = 4;  // "receipt-1" is 9 bytes.
  Rebuild(o);
  auto first = Charge();
  ASSERT_TRUE(first) << first.error().ToString();
  EXPECT_EQ(first->storage, OnceStorage::kTooLarge);
  EXPECT_EQ(Rows(), 1);
  // Not stored: the repeat runs the work again.
  auto again = Charge();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->storage, OnceStorage::kTooLarge);
  EXPECT_EQ(Rows(), 2);
}

}  // namespace
}  // namespace idem::testing
