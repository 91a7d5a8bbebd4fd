// Exactly once on SQLite: SqliteStore::CompleteInTransaction, the fencing
// token checked inside the caller's transaction on its own connection, the
// connections it refuses, and sql::RunInTransaction with a Guard (the
// ClaimHandle told of the commit, a takeover that makes the first
// transaction roll back).

#include <sqlite3.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "idem/guard.h"
#include "idem/sql_transaction.h"
#include "idem/sqlite_store.h"
#include "idem/sqlite_transaction.h"
#include "support/ids.h"
#include "support/sqlite_count.h"
#include "support/temp_dir.h"

namespace idem {
namespace {

using std::chrono::seconds;
using testing::TestFingerprint;
using testing::TestId;
using testing::TestToken;

constexpr Duration kTtl = std::chrono::hours(1);
constexpr Duration kLock = seconds(10);
const TimePoint kT0 = TimePoint(std::chrono::hours(24 * 365 * 50));

struct Db {
  explicit Db(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
  }
  ~Db() { sqlite3_close(db); }
  void Exec(const char* sql) {
    ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db);
  }
  long long Count() { return testing::SqliteCountRows(db, "transfers"); }
  sqlite3* db = nullptr;
};

Response Created(std::string body) {
  Response r;
  r.status = 201;
  r.headers = {{"Content-Type", "application/json"}};
  r.body = std::move(body);
  return r;
}

class SqliteTransactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStoreOptions options;
    options.path = (dir_.path() / "idem.db").string();
    auto opened = SqliteStore::Open(options);
    ASSERT_TRUE(opened) << opened.error().ToString();
    store_ = std::shared_ptr<SqliteStore>(std::move(*opened));
    db_ = std::make_unique<Db>(options.path);
    db_->Exec("CREATE TABLE transfers (id TEXT PRIMARY KEY)");
  }

  Token ClaimAt(const RecordId& id, TimePoint now) {
    auto claimed = store_->Claim(id, TestFingerprint(1), now, kTtl, kLock);
    EXPECT_TRUE(claimed) << claimed.error().ToString();
    EXPECT_EQ(claimed->outcome, ClaimOutcome::kAcquired);
    return claimed->token;
  }

  // BEGIN IMMEDIATE; insert; CompleteInTransaction; COMMIT or ROLLBACK as
  // the completion says.
  Result<TransactionCompletion> CompleteAndCommit(const RecordId& id,
                                                  const Token& token,
                                                  const Response& r) {
    db_->Exec("BEGIN IMMEDIATE");
    db_->Exec("INSERT INTO transfers VALUES (hex(randomblob(8)))");
    auto done = store_->CompleteInTransaction(db_->db, id, token, r);
    db_->Exec(done && *done == TransactionCompletion::kStored ? "COMMIT"
                                                              : "ROLLBACK");
    return done;
  }

  testing::TempDir dir_{"idem-sqlite-tx"};
  std::shared_ptr<SqliteStore> store_;
  std::unique_ptr<Db> db_;
};

TEST_F(SqliteTransactionTest, StoredAndVisibleOnlyAfterCommit) {
  const RecordId id = TestId(1);
  const Token token = ClaimAt(id, kT0);
  db_->Exec("BEGIN IMMEDIATE");
  db_->Exec("INSERT INTO transfers VALUES ('a')");
  auto done = store_->CompleteInTransaction(db_->db, id, token, Created("x"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  // Not committed: the store's own reader still sees the claim.
  auto before = store_->Inspect(id, kT0);
  ASSERT_TRUE(before && before->has_value());
  EXPECT_EQ((*before)->state, RecordState::kInProgress);
  db_->Exec("COMMIT");
  auto after = store_->Inspect(id, kT0);
  ASSERT_TRUE(after && after->has_value());
  EXPECT_EQ((*after)->state, RecordState::kCompleted);
  EXPECT_EQ(*(*after)->response, Created("x"));
  auto replay = store_->Claim(id, TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(db_->Count(), 1);
}

TEST_F(SqliteTransactionTest, RollbackLeavesTheClaimToRelease) {
  const RecordId id = TestId(2);
  const Token token = ClaimAt(id, kT0);
  db_->Exec("BEGIN IMMEDIATE");
  auto done = store_->CompleteInTransaction(db_->db, id, token, Created("x"));
  ASSERT_TRUE(done && *done == TransactionCompletion::kStored);
  db_->Exec("ROLLBACK");
  auto record = store_->Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
  auto released = store_->Release(id, token);
  ASSERT_TRUE(released);
  EXPECT_TRUE(*released);
}

TEST_F(SqliteTransactionTest, WrongTokenIsClaimLostAndWritesNothing) {
  const RecordId id = TestId(3);
  ClaimAt(id, kT0);
  auto done = CompleteAndCommit(id, TestToken(99), Created("x"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);
  EXPECT_EQ(db_->Count(), 0);
  auto record = store_->Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
}

TEST_F(SqliteTransactionTest, TakenOverAfterTheLockTimedOutIsClaimLost) {
  const RecordId id = TestId(4);
  const Token first = ClaimAt(id, kT0);
  const Token second = ClaimAt(id, kT0 + kLock + seconds(1));
  auto done = CompleteAndCommit(id, first, Created("first"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);
  done = CompleteAndCommit(id, second, Created("second"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  EXPECT_EQ(db_->Count(), 1);
}

TEST_F(SqliteTransactionTest, ExpiredAndReclaimedIsClaimLost) {
  const RecordId id = TestId(5);
  const Token first = ClaimAt(id, kT0);
  ClaimAt(id, kT0 + kTtl + seconds(1));
  auto done = CompleteAndCommit(id, first, Created("x"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);
}

TEST_F(SqliteTransactionTest, ReleasedRevokedOrCompletedIsClaimLost) {
  const RecordId released = TestId(6);
  const Token t1 = ClaimAt(released, kT0);
  ASSERT_TRUE(store_->Release(released, t1));
  auto done = CompleteAndCommit(released, t1, Created("x"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);

  const RecordId revoked = TestId(7);
  const Token t2 = ClaimAt(revoked, kT0);
  ASSERT_TRUE(store_->Revoke(revoked));
  done = CompleteAndCommit(revoked, t2, Created("x"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);

  const RecordId twice = TestId(8);
  const Token t3 = ClaimAt(twice, kT0);
  done = CompleteAndCommit(twice, t3, Created("one"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  done = CompleteAndCommit(twice, t3, Created("two"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);
  auto record = store_->Inspect(twice, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->response->body, "one");
  EXPECT_EQ(db_->Count(), 1);
}

TEST_F(SqliteTransactionTest, RefusesAConnectionOutsideATransaction) {
  const RecordId id = TestId(9);
  const Token token = ClaimAt(id, kT0);
  auto done = store_->CompleteInTransaction(db_->db, id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(done.error().message().find("no transaction open"),
            std::string::npos)
      << done.error().message();
  done = store_->CompleteInTransaction(nullptr, id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  // Nothing was written.
  auto record = store_->Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
}

TEST_F(SqliteTransactionTest, RefusesAnotherFileAndAnAttachedStoreFile) {
  const RecordId id = TestId(10);
  const Token token = ClaimAt(id, kT0);
  Db other((dir_.path() / "business.db").string());
  other.Exec("BEGIN IMMEDIATE");
  auto done = store_->CompleteInTransaction(other.db, id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(done.error().message().find("not the store's file"),
            std::string::npos)
      << done.error().message();
  other.Exec("ROLLBACK");
  // The store's file ATTACHed to another main database is refused too: WAL
  // mode does not commit the two files atomically.
  const std::string attach = "ATTACH DATABASE '" + store_->path() + "' AS idem";
  other.Exec(attach.c_str());
  other.Exec("BEGIN IMMEDIATE");
  done = store_->CompleteInTransaction(other.db, id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  other.Exec("ROLLBACK");
  auto record = store_->Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
}

// The Guard's side: RunInTransaction tells the ClaimHandle, Finish makes no
// store call, and a takeover makes the first handler's transaction roll
// back while the second one's commits.
class SqliteGuardTransactionTest : public SqliteTransactionTest {
 protected:
  void SetUp() override {
    SqliteTransactionTest::SetUp();
    GuardSetup setup;
    setup.store = store_;
    setup.clock = clock_;
    setup.options.lock_timeout = kLock;
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard);
    guard_ = std::move(*guard);
  }

  Decision Begin() { return guard_->BeginWithKey("", "key", "transfer", "in"); }

  Result<Response> Transfer(ClaimHandle& claim, const char* id) {
    SqliteTransaction tx(*store_, db_->db);
    return sql::RunInTransaction(tx, claim, [&](SqliteTransaction& t) {
      const std::string insert =
          std::string("INSERT INTO transfers VALUES ('") + id + "')";
      EXPECT_EQ(sqlite3_exec(t.db(), insert.c_str(), nullptr, nullptr, nullptr),
                SQLITE_OK);
      return Created(id);
    });
  }

  std::uint64_t Count(Outcome o) { return guard_->metrics().Get(o); }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kT0);
  std::unique_ptr<Guard> guard_;
};

TEST_F(SqliteGuardTransactionTest, CommittedCompletionIsFinishedWithoutAWrite) {
  Decision d = Begin();
  ASSERT_EQ(d.action, Action::kExecute);
  auto sent = Transfer(d.claim, "t1");
  ASSERT_TRUE(sent) << sent.error().ToString();
  EXPECT_EQ(sent->status, 201);
  // A Complete of the now completed record would report stale_complete.
  EXPECT_EQ(d.claim.Finish(*sent), FinishResult::kStored);
  EXPECT_EQ(Count(Outcome::kStaleComplete), 0u);
  EXPECT_EQ(Count(Outcome::kReleased), 0u);
  Decision replay = Begin();
  ASSERT_EQ(replay.action, Action::kRespond);
  EXPECT_EQ(replay.outcome, Outcome::kReplayed);
  EXPECT_EQ(replay.response.body, "t1");
  EXPECT_EQ(db_->Count(), 1);
}

TEST_F(SqliteGuardTransactionTest, UnstoredStatusCommitsAndReleases) {
  Decision d = Begin();
  ASSERT_EQ(d.action, Action::kExecute);
  SqliteTransaction tx(*store_, db_->db);
  auto sent = sql::RunInTransaction(tx, d.claim, [](SqliteTransaction&) {
    Response r;
    r.status = 503;
    return r;
  });
  ASSERT_TRUE(sent);
  EXPECT_EQ(d.claim.Finish(*sent), FinishResult::kReleased);
  EXPECT_EQ(Begin().action, Action::kExecute);
}

TEST_F(SqliteGuardTransactionTest, TakeoverMakesTheFirstTransactionRollBack) {
  Decision first = Begin();
  ASSERT_EQ(first.action, Action::kExecute);
  clock_->Advance(kLock + seconds(1));
  Decision second = Begin();
  ASSERT_EQ(second.action, Action::kExecute);
  ASSERT_TRUE(second.claim.takeover());

  auto lost = Transfer(first.claim, "first");
  ASSERT_TRUE(lost) << lost.error().ToString();
  EXPECT_EQ(lost->status, 409);
  EXPECT_EQ(db_->Count(), 0);  // Rolled back.
  EXPECT_EQ(first.claim.Finish(*lost), FinishResult::kStaleComplete);
  EXPECT_EQ(Count(Outcome::kStaleComplete), 1u);

  auto won = Transfer(second.claim, "second");
  ASSERT_TRUE(won);
  EXPECT_EQ(won->status, 201);
  EXPECT_EQ(second.claim.Finish(*won), FinishResult::kStored);
  EXPECT_EQ(db_->Count(), 1);
  Decision replay = Begin();
  ASSERT_EQ(replay.action, Action::kRespond);
  EXPECT_EQ(replay.response.body, "second");
}

TEST_F(SqliteGuardTransactionTest, HandlerThatThrowsRollsBackAndReleases) {
  Decision d = Begin();
  ASSERT_EQ(d.action, Action::kExecute);
  SqliteTransaction tx(*store_, db_->db);
  EXPECT_THROW(sql::RunInTransaction(
                   tx, d.claim,
                   [](SqliteTransaction& t) -> Response {
                     sqlite3_exec(t.db(), "INSERT INTO transfers VALUES ('x')",
                                  nullptr, nullptr, nullptr);
                     throw std::runtime_error("boom");
                   }),
               std::runtime_error);
  EXPECT_EQ(sqlite3_get_autocommit(db_->db), 1);
  EXPECT_EQ(db_->Count(), 0);
  d.claim.Abandon();
  EXPECT_EQ(Begin().action, Action::kExecute);
}

TEST_F(SqliteGuardTransactionTest, GuardRunPassesTheClaimToTheHandler) {
  RequestView view;
  view.method = "POST";
  view.target = "/transfers";
  const HeaderView headers[] = {{"Idempotency-Key", "\"k1\""}};
  view.headers = headers;
  RunInfo info;
  int runs = 0;
  auto run = [&] {
    return guard_->Run(
        view,
        [&](ClaimHandle& claim) {
          ++runs;
          auto sent = Transfer(claim, "run");
          return sent ? *sent : Response{500, {}, ""};
        },
        nullptr, &info);
  };
  EXPECT_EQ(run().status, 201);
  ASSERT_TRUE(info.finish.has_value());
  EXPECT_EQ(*info.finish, FinishResult::kStored);
  EXPECT_EQ(run().status, 201);
  EXPECT_EQ(info.outcome, Outcome::kReplayed);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(db_->Count(), 1);
}

}  // namespace
}  // namespace idem
