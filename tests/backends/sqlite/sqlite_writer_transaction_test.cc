// SqliteTransaction on the store's writer (SqliteTransaction(store)): what
// the SQL suites cannot see through their one thread.
//
//  - Other threads' writes wait for the transaction and commit after it; one
//    that waits beyond busy_timeout fails with kUnavailable, is taken off
//    the queue and wrote nothing.
//  - A store call from the holding thread fails at once (no deadlock), and
//    a fail-open route does not run unprotected because of it.
//  - The writer is released however the transaction ends: commit,
//    rollback, a throw in the work, the object destroyed, a statement left
//    on the connection, the transaction ended on db() by the application.
//  - Another connection's write lock makes Begin wait, then kUnavailable.
//  - Many threads of transactions and store calls together: every key's
//    work runs once, with its completion, and the file stays sound; two
//    stores on one file (two processes) take turns in SQLite's file lock;
//    the commits reach the checkpointer (the WAL stays bounded).
//  - A renewal queued behind the transaction reports nothing when the
//    transaction completed the claim.
//
// Waits are WaitFor polls for a state another thread reaches (a call
// queued), never for timing; the one timeout tested is the store's
// busy_timeout, made short.

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/metrics.h"
#include "idem/sql_once.h"
#include "idem/sql_transaction.h"
#include "idem/sqlite_store.h"
#include "idem/sqlite_transaction.h"
#include "sqlite_store_test_peer.h"
#include "support/ids.h"
#include "support/sqlite_count.h"
#include "support/store_times.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::kLock;
using testing::kT0;
using testing::kTtl;
using testing::TestFingerprint;
using testing::TestId;
using testing::WaitFor;

Response Created(const std::string& body) {
  return Response{201, {{"Content-Type", "application/json"}}, body};
}

// The first column of the first row of `sql` on the file at `path`, as
// text ("" when there is none).
std::string QueryText(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_stmt* stmt = nullptr;
  std::string out;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    if (text != nullptr) out = reinterpret_cast<const char*>(text);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

// Runs `sql` on `db`; false (and a test failure) when it fails.
bool Exec(sqlite3* db, const std::string& sql) {
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
  EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << sqlite3_errmsg(db);
  return rc == SQLITE_OK;
}

class SqliteWriterTransactionTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(seconds(60)); }

  // The store on a fresh file with `busy_timeout`, and the table
  // `transfers (id TEXT)` made on a connection of the test's own.
  void Open(milliseconds busy_timeout) {
    store_.reset();
    auto opened =
        SqliteStore::Open({.path = path(), .busy_timeout = busy_timeout});
    ASSERT_TRUE(opened) << opened.error().ToString();
    store_ = std::shared_ptr<SqliteStore>(std::move(*opened));
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path().c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 60000);
    Exec(db, "CREATE TABLE IF NOT EXISTS transfers (id TEXT)");
    sqlite3_close(db);
  }

  std::string path() const { return (dir_.path() / "idem.db").string(); }
  long long Rows() { return testing::SqliteCountRows(path(), "transfers"); }

  Result<ClaimResult> ClaimId(std::uint64_t n) {
    return store_->Claim(TestId(n), TestFingerprint(n), kT0, kTtl, kLock);
  }
  bool Absent(std::uint64_t n) {
    auto record = store_->Inspect(TestId(n), kT0);
    return record.has_value() && !record->has_value();
  }

  // A Guard on the store, its clock clock_, its metrics metrics_.
  std::unique_ptr<Guard> MakeGuard(GuardOptions options = {}) {
    GuardSetup setup;
    setup.store = store_;
    setup.clock = clock_;
    setup.metrics = metrics_;
    options.lock_timeout = kLock;
    setup.options = options;
    setup.log = [](LogLevel, std::string_view) {};
    auto guard = Guard::Create(std::move(setup));
    EXPECT_TRUE(guard) << guard.error().ToString();
    return guard ? std::move(*guard) : nullptr;
  }

  testing::TempDir dir_{"idem-sqlite-writer-tx"};
  std::shared_ptr<SqliteStore> store_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kT0);
  std::shared_ptr<Metrics> metrics_ = std::make_shared<Metrics>();
};

TEST_F(SqliteWriterTransactionTest, OtherThreadsWritesWaitAndCommitAfter) {
  constexpr int kThreads = 8;
  SqliteTransaction tx(*store_);
  ASSERT_TRUE(tx.Begin());
  ASSERT_NE(tx.db(), nullptr);
  ASSERT_TRUE(Exec(tx.db(), "INSERT INTO transfers VALUES ('held')"));
  std::vector<std::optional<Result<ClaimResult>>> claims(kThreads);
  std::atomic<int> returned{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      claims[t].emplace(ClaimId(1 + t));
      ++returned;
    });
  }
  ASSERT_TRUE(WaitFor(
      [&] { return SqliteStoreTestPeer::QueuedWrites(*store_) == kThreads; }));
  // Queued behind the transaction: none can have run.
  EXPECT_EQ(returned.load(), 0);
  EXPECT_EQ(Rows(), 0);  // Not committed yet.
  ASSERT_TRUE(tx.Commit());
  EXPECT_EQ(tx.db(), nullptr);
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(claims[t].has_value());
    ASSERT_TRUE(*claims[t]) << claims[t]->error().ToString();
    EXPECT_EQ((*claims[t])->outcome, ClaimOutcome::kAcquired);
  }
  EXPECT_EQ(Rows(), 1);
  EXPECT_EQ(SqliteStoreTestPeer::QueuedWrites(*store_), 0u);
}

// The wait is bounded by busy_timeout, and the call that gave up is gone
// from the queue: the next transaction's queued calls run without it (a
// dangling one would be a use after return, which ASan and TSan see).
TEST_F(SqliteWriterTransactionTest, AWriteHeldBeyondBusyTimeoutIsUnavailable) {
  Open(milliseconds(50));
  auto before = ClaimId(1);
  ASSERT_TRUE(before);
  SqliteTransaction tx(*store_);
  ASSERT_TRUE(tx.Begin());
  std::optional<Result<ClaimResult>> claim;
  std::optional<Result<bool>> complete;
  std::thread waiter([&] {
    claim.emplace(ClaimId(2));
    complete.emplace(
        store_->Complete(TestId(1), before->token, Created("late")));
  });
  waiter.join();  // The transaction stays open until both gave up.
  ASSERT_FALSE(*claim);
  EXPECT_EQ(claim->error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(claim->error().message(), HasSubstr(path()));
  EXPECT_THAT(claim->error().message(),
              HasSubstr("claim: the store's writer was held by an application "
                        "transaction (SqliteTransaction) for more than "
                        "busy_timeout=50 ms"));
  ASSERT_FALSE(*complete);
  EXPECT_EQ(complete->error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(SqliteStoreTestPeer::QueuedWrites(*store_), 0u);
  // Reads do not wait for the writer.
  auto inspect = store_->Inspect(TestId(1), kT0);
  ASSERT_TRUE(inspect && inspect->has_value());
  EXPECT_EQ((*inspect)->state, RecordState::kInProgress);
  tx.Rollback();

  EXPECT_TRUE(Absent(2));  // Nothing was written.
  auto again = ClaimId(2);
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_EQ(again->outcome, ClaimOutcome::kAcquired);
  EXPECT_EQ(store_->Complete(TestId(1), before->token, Created("x")), true);
}

// A second transaction waits for the first as writes do, and gives up
// after busy_timeout naming it.
TEST_F(SqliteWriterTransactionTest, ABeginHeldBeyondBusyTimeoutIsUnavailable) {
  Open(milliseconds(50));
  SqliteTransaction first(*store_);
  ASSERT_TRUE(first.Begin());
  Status second_began;
  std::thread other([&] {
    SqliteTransaction second(*store_);
    second_began = second.Begin();
  });
  other.join();
  ASSERT_FALSE(second_began);
  EXPECT_EQ(second_began.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(second_began.error().message(),
              HasSubstr("begin: the store's writer was held by an application "
                        "transaction"));
  ASSERT_TRUE(first.Commit());
}

TEST_F(SqliteWriterTransactionTest, AStoreCallFromTheHoldingThreadFailsAtOnce) {
  auto held = ClaimId(1);
  ASSERT_TRUE(held);
  SqliteTransaction tx(*store_);
  ASSERT_TRUE(tx.Begin());
  for (auto failed :
       {ClaimId(2).map([](auto&&) {}),
        store_->Release(TestId(1), held->token).map([](auto&&) {}),
        store_->ExtendLock(TestId(1), held->token, kT0, kLock).map([](auto&&) {
        }),
        store_->PurgeExpired(kT0, 10).map([](auto&&) {})}) {
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(failed.error().message(),
                HasSubstr("this thread holds the store's writer in an open "
                          "SqliteTransaction"));
  }
  SqliteTransaction nested(*store_);
  Status began = nested.Begin();
  ASSERT_FALSE(began);
  EXPECT_EQ(began.error().code(), ErrorCode::kInvalidArgument);
  // The same object twice.
  began = tx.Begin();
  ASSERT_FALSE(began);
  EXPECT_EQ(began.error().code(), ErrorCode::kInvalidArgument);
  // Reads are on their own connections.
  EXPECT_TRUE(store_->Inspect(TestId(1), kT0));
  ASSERT_TRUE(tx.Commit());
  EXPECT_TRUE(ClaimId(2));
  EXPECT_EQ(store_->Release(TestId(1), held->token), true);
}

// The Guard answers that error with a 503 even on a fail-open route: it is
// not an outage, and protection must not switch off because of it.
TEST_F(SqliteWriterTransactionTest,
       AGuardCallFromTheHoldingThreadIs503EvenFailOpen) {
  GuardOptions options;
  options.on_store_error = StoreErrorPolicy::kFailOpen;
  auto guard = MakeGuard(options);
  ASSERT_NE(guard, nullptr);
  SqliteTransaction tx(*store_);
  ASSERT_TRUE(tx.Begin());
  Decision d = guard->BeginWithKey("", "k", "nested", "in");
  tx.Rollback();
  EXPECT_EQ(d.action, Action::kRespond);
  EXPECT_EQ(d.response.status, 503);
  EXPECT_EQ(guard->metrics().Get(Outcome::kFailOpen), 0u);
  EXPECT_EQ(guard->BeginWithKey("", "k", "nested", "in").action,
            Action::kExecute);
}

TEST_F(SqliteWriterTransactionTest, ADestroyedTransactionRollsBackAndReleases) {
  {
    SqliteTransaction tx(*store_);
    ASSERT_TRUE(tx.Begin());
    ASSERT_TRUE(Exec(tx.db(), "INSERT INTO transfers VALUES ('lost')"));
  }
  EXPECT_EQ(Rows(), 0);
  auto claim = ClaimId(1);  // From this thread: not held any more.
  ASSERT_TRUE(claim) << claim.error().ToString();
  SqliteTransaction again(*store_);
  EXPECT_TRUE(again.Begin());
}

TEST_F(SqliteWriterTransactionTest, AThrowInTheWorkRollsBackAndReleases) {
  auto guard = MakeGuard();
  ASSERT_NE(guard, nullptr);
  Decision d = guard->BeginWithKey("", "k", "throw", "in");
  ASSERT_EQ(d.action, Action::kExecute);
  {
    SqliteTransaction tx(*store_);
    EXPECT_THROW(sql::RunInTransaction(
                     tx, d.claim,
                     [](SqliteTransaction& t) -> Response {
                       Exec(t.db(), "INSERT INTO transfers VALUES ('x')");
                       throw std::runtime_error("boom");
                     }),
                 std::runtime_error);
    EXPECT_EQ(tx.db(), nullptr);
  }
  d.claim.Abandon();  // What Guard::Run and the adapters do.
  EXPECT_EQ(Rows(), 0);
  EXPECT_EQ(guard->BeginWithKey("", "k", "throw", "in").action,
            Action::kExecute);
}

// A statement the application prepared on db() and did not finalize: the
// commit is refused and rolled back, the store drops that connection (the
// statement keeps it alive until it is finalized) and writes on a new one.
TEST_F(SqliteWriterTransactionTest, AStatementLeftOnTheConnectionRollsBack) {
  for (const bool commit : {true, false}) {
    SCOPED_TRACE(commit);
    SqliteTransaction tx(*store_);
    ASSERT_TRUE(tx.Begin());
    sqlite3_stmt* stmt = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(tx.db(), "INSERT INTO transfers VALUES ('s')",
                                 -1, &stmt, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(stmt), SQLITE_DONE);
    if (commit) {
      Status committed = tx.Commit();
      ASSERT_FALSE(committed);
      EXPECT_EQ(committed.error().code(), ErrorCode::kInvalidArgument);
      EXPECT_THAT(committed.error().message(), HasSubstr("not finalized"));
    } else {
      tx.Rollback();
    }
    EXPECT_EQ(tx.db(), nullptr);
    EXPECT_EQ(sqlite3_finalize(stmt), SQLITE_OK);  // Frees the old one.
    EXPECT_EQ(Rows(), 0);
    auto claim = ClaimId(commit ? 1 : 2);
    ASSERT_TRUE(claim) << claim.error().ToString();
    EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  }
  SqliteTransaction tx(*store_);
  ASSERT_TRUE(tx.Begin());
  ASSERT_TRUE(Exec(tx.db(), "INSERT INTO transfers VALUES ('kept')"));
  ASSERT_TRUE(tx.Commit());
  EXPECT_EQ(Rows(), 1);
}

TEST_F(SqliteWriterTransactionTest, ATransactionEndedOnItsConnectionIsRefused) {
  auto held = ClaimId(1);
  ASSERT_TRUE(held);
  SqliteTransaction tx(*store_);
  ASSERT_TRUE(tx.Begin());
  ASSERT_TRUE(Exec(tx.db(), "ROLLBACK"));
  auto done = store_->CompleteInTransaction(tx.db(), TestId(1), held->token,
                                            Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(done.error().message(), HasSubstr("no longer open"));
  Status committed = tx.Commit();
  ASSERT_FALSE(committed);
  EXPECT_EQ(committed.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->Complete(TestId(1), held->token, Created("y")), true);
}

// Other processes (here a connection of the test's own) still meet the
// transaction in SQLite's file lock: Begin waits for theirs up to
// busy_timeout, then fails with the writer released.
TEST_F(SqliteWriterTransactionTest, AnotherConnectionsLockMakesBeginWait) {
  Open(milliseconds(50));
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path().c_str(), &other), SQLITE_OK);
  ASSERT_TRUE(Exec(other, "BEGIN IMMEDIATE"));
  {
    SqliteTransaction tx(*store_);
    Status began = tx.Begin();
    ASSERT_FALSE(began);
    EXPECT_EQ(began.error().code(), ErrorCode::kUnavailable);
    EXPECT_THAT(began.error().message(), HasSubstr("busy_timeout=50 ms"));
    EXPECT_EQ(tx.db(), nullptr);
  }
  ASSERT_TRUE(Exec(other, "ROLLBACK"));
  SqliteTransaction tx(*store_);
  ASSERT_TRUE(tx.Begin());
  // And the other connection meets this one.
  EXPECT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr),
            SQLITE_BUSY);
  ASSERT_TRUE(tx.Commit());
  sqlite3_close(other);
  EXPECT_TRUE(ClaimId(1));
}

// Eight threads run transactions on the writer for the same keys while two
// threads claim and complete keys of their own the classic way: every
// key's work ran once and was completed with it, every classic key is
// completed, and the file is sound.
TEST_F(SqliteWriterTransactionTest, ManyThreadsRunEachKeysWorkOnce) {
  constexpr int kTxThreads = 8;
  constexpr int kKeys = 40;
  constexpr int kClassicThreads = 2;
  constexpr int kClassicPerThread = 100;
  auto guard = MakeGuard();
  ASSERT_NE(guard, nullptr);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kTxThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kKeys; ++i) {
        const std::string key = "k" + std::to_string((i + 5 * t) % kKeys);
        Decision d = guard->BeginWithKey("", key, "transfer", "in");
        if (d.action != Action::kExecute) continue;  // Taken, or done.
        SqliteTransaction tx(*store_);
        auto sent = sql::RunInTransaction(tx, d.claim, [&](auto& txn) {
          if (!Exec(txn.db(), "INSERT INTO transfers VALUES ('" + key + "')")) {
            throw std::runtime_error("insert");
          }
          return Created(key);
        });
        if (!sent || d.claim.Finish(*sent) != FinishResult::kStored) ++errors;
      }
    });
  }
  for (int t = 0; t < kClassicThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kClassicPerThread; ++i) {
        const std::uint64_t n = 1000 + t * kClassicPerThread + i;
        auto claim = ClaimId(n);
        if (!claim || claim->outcome != ClaimOutcome::kAcquired ||
            store_->Complete(TestId(n), claim->token, Created("c")) != true) {
          ++errors;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(Rows(), kKeys);
  EXPECT_EQ(QueryText(path(), "SELECT count(DISTINCT id) FROM transfers"),
            std::to_string(kKeys));
  EXPECT_EQ(QueryText(path(), "PRAGMA integrity_check"), "ok");
  for (int i = 0; i < kKeys; ++i) {
    Decision replay =
        guard->BeginWithKey("", "k" + std::to_string(i), "transfer", "in");
    ASSERT_EQ(replay.action, Action::kRespond) << i;
    EXPECT_EQ(replay.outcome, Outcome::kReplayed) << i;
    EXPECT_EQ(replay.response.body, "k" + std::to_string(i));
  }
  for (std::uint64_t n = 1000; n < 1000 + kClassicThreads * kClassicPerThread;
       ++n) {
    auto record = store_->Inspect(TestId(n), kT0);
    ASSERT_TRUE(record && record->has_value()) << n;
    EXPECT_EQ((*record)->state, RecordState::kCompleted) << n;
  }
}

// Two stores on one file, as two processes would have: their writers meet
// in SQLite's file lock (busy_timeout), each with transactions held on it
// and claims queued behind them, and every one of them commits.
TEST_F(SqliteWriterTransactionTest, TwoStoresOnOneFileTakeTurnsInTheFileLock) {
  auto other = SqliteStore::Open({.path = path(), .busy_timeout = seconds(60)});
  ASSERT_TRUE(other) << other.error().ToString();
  SqliteStore* stores[] = {store_.get(), other->get()};
  constexpr int kThreadsPerStore = 4;
  constexpr int kPerThread = 50;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int s = 0; s < 2; ++s) {
    for (int t = 0; t < kThreadsPerStore; ++t) {
      threads.emplace_back([&, s, t] {
        SqliteStore& store = *stores[s];
        for (int i = 0; i < kPerThread; ++i) {
          const std::uint64_t n =
              1 + ((s * kThreadsPerStore + t) * kPerThread + i);
          auto claim =
              store.Claim(TestId(n), TestFingerprint(n), kT0, kTtl, kLock);
          if (!claim || claim->outcome != ClaimOutcome::kAcquired) {
            ++errors;
            continue;
          }
          SqliteTransaction tx(store);
          auto done = tx.Begin().and_then([&]() -> Status {
            if (!Exec(tx.db(), "INSERT INTO transfers VALUES ('" +
                                   std::to_string(n) + "')")) {
              return MakeError(ErrorCode::kInternal, "insert");
            }
            return {};
          });
          auto completed =
              done
                  ? store.CompleteInTransaction(tx.db(), TestId(n),
                                                claim->token, Created("t"))
                  : Result<TransactionCompletion>(tl::unexpected(done.error()));
          if (!completed || *completed != TransactionCompletion::kStored ||
              !tx.Commit()) {
            ++errors;
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(Rows(), 2 * kThreadsPerStore * kPerThread);
  for (std::uint64_t n = 1; n <= 2 * kThreadsPerStore * kPerThread; ++n) {
    auto record = store_->Inspect(TestId(n), kT0);
    ASSERT_TRUE(record && record->has_value()) << n;
    EXPECT_EQ((*record)->state, RecordState::kCompleted) << n;
  }
  EXPECT_EQ(QueryText(path(), "PRAGMA integrity_check"), "ok");
}

// The commits of transactions on the writer go through its WAL hook like
// the store's own: the checkpointer copies them, and the WAL stays bounded
// (without checkpoints these ~4000 transactions of 4 KiB rows would leave
// ~50 MiB).
TEST_F(SqliteWriterTransactionTest, TheCheckpointerSeesTheCommits) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 1000;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        SqliteTransaction tx(*store_);
        if (!tx.Begin() ||
            !Exec(tx.db(),
                  "INSERT INTO transfers VALUES (hex(randomblob(2048)))") ||
            !tx.Commit()) {
          ++errors;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(Rows(), kThreads * kPerThread);
  EXPECT_LT(std::filesystem::file_size(path() + "-wal"), 24u << 20);
  EXPECT_EQ(QueryText(path(), "PRAGMA integrity_check"), "ok");
}

// Lock renewal goes on while the work runs (RunOnceInTransaction renews on
// the Guard's thread). A renewal due while the transaction holds the writer
// queues behind it; the completion in the transaction stops renewing
// (ClaimHandle::StopRenewal), so when the renewal runs after the commit and
// finds the record completed, it reports nothing: no renewal_lost, and the
// value is stored.
TEST_F(SqliteWriterTransactionTest, ARenewalQueuedBehindTheCompletionIsQuiet) {
  GuardOptions options;
  options.lock_renewal = seconds(1);
  auto guard = MakeGuard(options);
  ASSERT_NE(guard, nullptr);
  bool queued = false;
  auto charge = [&] {
    SqliteTransaction tx(*store_);
    return sql::RunOnceInTransaction(
        *guard, tx, "", "r1", "charge", "in", [&](SqliteTransaction& t) {
          Exec(t.db(), "INSERT INTO transfers VALUES ('r1')");
          clock_->Advance(options.lock_renewal);  // A renewal is due.
          queued = WaitFor(
              [&] { return SqliteStoreTestPeer::QueuedWrites(*store_) == 1; });
          return std::string("receipt");
        });
  };
  auto first = charge();
  ASSERT_TRUE(first) << first.error().ToString();
  EXPECT_TRUE(queued);
  EXPECT_EQ(first->storage, OnceStorage::kStored);
  auto again = charge();
  ASSERT_TRUE(again) << again.error().ToString();
  EXPECT_TRUE(again->replayed);
  EXPECT_EQ(again->value, "receipt");
  guard.reset();  // Joins the renewal thread: the renewal has ended.
  EXPECT_EQ(metrics_->Get(Outcome::kRenewalLost), 0u);
  EXPECT_EQ(SqliteStoreTestPeer::QueuedWrites(*store_), 0u);
  EXPECT_EQ(Rows(), 1);
}

}  // namespace
}  // namespace idem
