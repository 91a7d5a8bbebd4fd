// sql::RunOnceInTransaction over a scripted transaction type: which
// transaction steps run, what the claim is told, and what becomes of the key
// on each error. Real SQLite and PostgreSQL runs are in
// tests/backends/{sqlite,postgres}.

#include "idem/sql_once.h"

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "baseline/sharded_mutex_store.h"
#include "support/faulty_store.h"

namespace idem {
namespace {

// A transaction that holds the completion until Commit, then makes it
// through the store (so a replay finds it), and fails where it is told to.
class ScriptedTx {
 public:
  explicit ScriptedTx(Store& store) : store_(store) {}

  std::optional<ErrorCode> fail_begin, fail_complete, fail_commit;
  bool claim_lost = false;
  // Commit fails after committing (an outcome the caller cannot know).
  bool commit_then_fail = false;
  int begins = 0, commits = 0, rollbacks = 0, completes = 0;
  bool open = false;

  Status Begin() {
    ++begins;
    if (fail_begin) return MakeError(*fail_begin, "begin failed");
    open = true;
    return {};
  }
  Status Commit() {
    ++commits;
    if (fail_commit && !commit_then_fail) {
      return MakeError(*fail_commit, "commit failed");
    }
    open = false;
    if (pending_) {
      EXPECT_TRUE(store_.Complete(id_, token_, *pending_).value_or(false));
      pending_.reset();
    }
    if (fail_commit) return MakeError(*fail_commit, "commit outcome unknown");
    return {};
  }
  void Rollback() {
    if (open) ++rollbacks;
    open = false;
    pending_.reset();
  }
  Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                         const Response& stored) {
    ++completes;
    if (fail_complete) return MakeError(*fail_complete, "complete failed");
    if (claim_lost) return TransactionCompletion::kClaimLost;
    id_ = claim.record_id();
    token_ = claim.token();
    pending_ = stored;
    return TransactionCompletion::kStored;
  }

 private:
  Store& store_;
  RecordId id_;
  Token token_;
  std::optional<Response> pending_;
};

class SqlOnceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_shared<testing::FaultyStore>(
        std::make_shared<bench::ShardedMutexStore>());
    GuardSetup setup;
    setup.store = store_;
    setup.clock = clock_;
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard.has_value());
    guard_ = std::move(*guard);
  }

  Result<OnceResult> Charge(ScriptedTx& tx) {
    return sql::RunOnceInTransaction(
        *guard_, tx, "billing", "msg-1", "charge", "42 EUR", [&](ScriptedTx&) {
          ++runs_;
          return "receipt-" + std::to_string(runs_);
        });
  }
  // Whether the key is free: a new claim runs (and is released again).
  bool KeyFree() {
    Decision d = guard_->BeginWithKey("billing", "msg-1", "charge", "42 EUR");
    return d.action == Action::kExecute;
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<testing::FaultyStore> store_;
  std::unique_ptr<Guard> guard_;
  int runs_ = 0;
};

TEST_F(SqlOnceTest, CommittedCompletionIsStoredAndFinishedWithoutAWrite) {
  ScriptedTx tx(*store_);
  auto first = Charge(tx);
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  EXPECT_EQ(first->value, "receipt-1");
  EXPECT_EQ(first->storage, OnceStorage::kStored);
  EXPECT_EQ(tx.completes, 1);
  EXPECT_EQ(tx.commits, 1);
  // The transaction's completion only: Finish made no Complete or Release.
  EXPECT_EQ(store_->completes, 1);
  EXPECT_EQ(store_->releases, 0);
  ScriptedTx again_tx(*store_);
  auto again = Charge(again_tx);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->value, "receipt-1");
  EXPECT_EQ(again_tx.begins, 0);
  EXPECT_EQ(runs_, 1);
}

TEST_F(SqlOnceTest, ClaimLostIsAbortedAndRolledBack) {
  ScriptedTx tx(*store_);
  tx.claim_lost = true;
  auto lost = Charge(tx);
  ASSERT_FALSE(lost.has_value());
  EXPECT_EQ(lost.error().code(), ErrorCode::kAborted);
  EXPECT_EQ(tx.rollbacks, 1);
  EXPECT_EQ(tx.commits, 0);
  EXPECT_EQ(guard_->metrics().Get(Outcome::kStaleComplete), 1u);
  // Nothing to release: the key belongs to the run that took it over.
  EXPECT_EQ(store_->releases, 0);
}

TEST_F(SqlOnceTest, BeginErrorRunsNothingAndReleasesTheKey) {
  ScriptedTx tx(*store_);
  tx.fail_begin = ErrorCode::kUnavailable;
  auto failed = Charge(tx);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(store_->releases, 1);
  EXPECT_TRUE(KeyFree());
}

TEST_F(SqlOnceTest, CompleteErrorRollsBackAndReleasesTheKey) {
  ScriptedTx tx(*store_);
  tx.fail_complete = ErrorCode::kUnavailable;
  auto failed = Charge(tx);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(tx.rollbacks, 1);
  EXPECT_EQ(tx.commits, 0);
  EXPECT_TRUE(KeyFree());
}

TEST_F(SqlOnceTest, CommitErrorReleasesTheKey) {
  ScriptedTx tx(*store_);
  tx.fail_commit = ErrorCode::kInternal;
  auto failed = Charge(tx);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code(), ErrorCode::kInternal);
  EXPECT_EQ(tx.rollbacks, 1);
  EXPECT_TRUE(KeyFree());
}

// A commit that did commit but reported an error: the completed record is
// not released, so the repeat replays instead of running again.
TEST_F(SqlOnceTest, CommitOfUnknownOutcomeThatCommittedReplays) {
  ScriptedTx tx(*store_);
  tx.fail_commit = ErrorCode::kUnavailable;
  tx.commit_then_fail = true;
  auto failed = Charge(tx);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code(), ErrorCode::kUnavailable);
  ScriptedTx again_tx(*store_);
  auto again = Charge(again_tx);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->value, "receipt-1");
  EXPECT_EQ(runs_, 1);
}

TEST_F(SqlOnceTest, WorkThatThrowsRollsBackAndReleases) {
  ScriptedTx tx(*store_);
  EXPECT_THROW(sql::RunOnceInTransaction(*guard_, tx, "billing", "msg-1",
                                         "charge", "42 EUR",
                                         [](ScriptedTx&) -> std::string {
                                           throw std::runtime_error("declined");
                                         }),
               std::runtime_error);
  EXPECT_EQ(tx.rollbacks, 1);
  EXPECT_TRUE(KeyFree());
}

TEST_F(SqlOnceTest, SwitchedOffRunsTheWorkInItsTransactionUnprotected) {
  guard_->SetEnabled(false);
  ScriptedTx tx(*store_);
  auto result = Charge(tx);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->storage, OnceStorage::kUnprotected);
  EXPECT_EQ(tx.commits, 1);
  EXPECT_EQ(tx.completes, 0);
  EXPECT_EQ(store_->claims, 0);
}

// RunOnce hands its fn the claim when fn takes one; inactive unprotected.
TEST_F(SqlOnceTest, RunOnceGivesAClaimTakingFnItsClaim) {
  bool active = false;
  auto run = [&] {
    return RunOnce(*guard_, "billing", "msg-2", "charge", "42 EUR",
                   [&](ClaimHandle& claim) {
                     active = claim.active();
                     return std::string("r");
                   });
  };
  ASSERT_TRUE(run().has_value());
  EXPECT_TRUE(active);
  guard_->SetEnabled(false);
  auto unprotected = run();
  ASSERT_TRUE(unprotected.has_value());
  EXPECT_EQ(unprotected->storage, OnceStorage::kUnprotected);
  EXPECT_FALSE(active);
}

}  // namespace
}  // namespace idem
