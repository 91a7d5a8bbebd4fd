// sql::RunOnceInTransaction on a real SQLite file: the job's row and its
// record's completion commit together, a repeat replays without running the
// work, a takeover makes the first run roll back (kAborted), a throw rolls
// back and releases, and a value over max_stored_response commits alone.

#include <sqlite3.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "idem/guard.h"
#include "idem/sql_once.h"
#include "idem/sqlite_store.h"
#include "idem/sqlite_transaction.h"
#include "support/sqlite_count.h"
#include "support/temp_dir.h"

namespace idem {
namespace {

using std::chrono::seconds;

constexpr Duration kLock = seconds(10);
const TimePoint kT0 = TimePoint(std::chrono::hours(24 * 365 * 50));

// SqliteTransaction with a hook that runs before BEGIN: the store's own
// writes wait for BEGIN IMMEDIATE's lock, so a takeover must come first.
struct HookedTx {
  SqliteTransaction& tx;
  std::function<void()> before_begin;
  Status Begin() {
    if (before_begin) before_begin();
    return tx.Begin();
  }
  Status Commit() { return tx.Commit(); }
  void Rollback() { tx.Rollback(); }
  Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                         const Response& stored) {
    return tx.Complete(claim, stored);
  }
  sqlite3* db() const { return tx.db(); }
};

class SqliteOnceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStoreOptions options;
    options.path = (dir_.path() / "idem.db").string();
    auto opened = SqliteStore::Open(options);
    ASSERT_TRUE(opened) << opened.error().ToString();
    store_ = std::shared_ptr<SqliteStore>(std::move(*opened));
    ASSERT_EQ(sqlite3_open(options.path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 5000);
    ASSERT_EQ(sqlite3_exec(db_, "CREATE TABLE charges (id TEXT)", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    Rebuild(GuardOptions{});
  }
  void TearDown() override { sqlite3_close(db_); }

  void Rebuild(GuardOptions options) {
    options.lock_timeout = kLock;
    GuardSetup setup;
    setup.store = store_;
    setup.clock = clock_;
    setup.options = std::move(options);
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard);
    guard_ = std::move(*guard);
  }

  Result<OnceResult> Charge(std::function<void()> before_begin = {},
                            bool fail = false) {
    SqliteTransaction tx(*store_, db_);
    HookedTx hooked{tx, std::move(before_begin)};
    return sql::RunOnceInTransaction(
        *guard_, hooked, "billing", "msg-1", "charge", "42 EUR",
        [&](HookedTx& t) {
          ++runs_;
          EXPECT_EQ(sqlite3_exec(t.db(), "INSERT INTO charges VALUES ('c')",
                                 nullptr, nullptr, nullptr),
                    SQLITE_OK);
          if (fail) throw std::runtime_error("declined");
          return "receipt-" + std::to_string(runs_);
        });
  }

  long long Rows() { return testing::SqliteCountRows(db_, "charges"); }

  testing::TempDir dir_{"idem-sqlite-once"};
  std::shared_ptr<SqliteStore> store_;
  sqlite3* db_ = nullptr;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kT0);
  std::unique_ptr<Guard> guard_;
  int runs_ = 0;
};

TEST_F(SqliteOnceTest, CommittedIsStoredAndARepeatReplaysWithoutTheWork) {
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

TEST_F(SqliteOnceTest, TakeoverRollsTheFirstRunBackAsAborted) {
  Decision other;
  auto lost = Charge([&] {
    clock_->Advance(kLock + seconds(1));
    other = guard_->BeginWithKey("billing", "msg-1", "charge", "42 EUR");
    ASSERT_EQ(other.action, Action::kExecute);
    EXPECT_TRUE(other.claim.takeover());
  });
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code(), ErrorCode::kAborted);
  EXPECT_EQ(Rows(), 0);
  EXPECT_EQ(sqlite3_get_autocommit(db_), 1);
  EXPECT_EQ(guard_->metrics().Get(Outcome::kStaleComplete), 1u);
  // The run that took over finishes; a retry gets its result.
  Response theirs;
  theirs.body = "theirs";
  EXPECT_EQ(other.claim.Finish(theirs), FinishResult::kStored);
  auto retry = Charge();
  ASSERT_TRUE(retry);
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->value, "theirs");
  EXPECT_EQ(runs_, 1);
}

TEST_F(SqliteOnceTest, WorkThatThrowsRollsBackAndReleases) {
  EXPECT_THROW(Charge({}, /*fail=*/true), std::runtime_error);
  EXPECT_EQ(Rows(), 0);
  EXPECT_EQ(sqlite3_get_autocommit(db_), 1);
  auto retry = Charge();
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->storage, OnceStorage::kStored);
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Rows(), 1);
}

TEST_F(SqliteOnceTest, AValueOverMaxStoredResponseCommitsAlone) {
  GuardOptions o;
  o.max_stored_response = 4;  // "receipt-1" is 9 bytes.
  Rebuild(o);
  auto first = Charge();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->storage, OnceStorage::kTooLarge);
  EXPECT_EQ(Rows(), 1);
  // Not stored: the repeat runs the work again.
  auto again = Charge();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->storage, OnceStorage::kTooLarge);
  EXPECT_EQ(Rows(), 2);
}

}  // namespace
}  // namespace idem
