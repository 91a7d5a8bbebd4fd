// Exactly once on SQLite: the SQL suites (backends/sql) on a SQLite file,
// with the application's transaction on a connection of its own (sqlite)
// and on the store's writer (sqlite_writer), and the cases only SQLite has:
// a takeover that comes before BEGIN IMMEDIATE, the other files and
// ATTACHed store files CompleteInTransaction refuses, and
// sql::RunInTransaction with a Guard (the ClaimHandle told of the commit, a
// takeover that makes the first transaction roll back). The writer form's
// own cases are in sqlite_writer_transaction_test.cc.

#include <sqlite3.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "backends/sql/sql_transaction_suite.h"
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
using testing::Created;
using testing::TestId;

void ExecOn(sqlite3* db, const char* sql) {
  ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK)
      << sql << ": " << sqlite3_errmsg(db);
}

struct Db {
  explicit Db(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
  }
  ~Db() { sqlite3_close(db); }
  void Exec(const char* sql) { ExecOn(db, sql); }
  sqlite3* db = nullptr;
};

// A SqliteStore in a fresh directory, and a connection of the
// application's own to its file.
class SqliteSql : public testing::SqlBackend {
 public:
  void SetUp(const std::string& table, const std::string& columns) override {
    table_ = table;
    SqliteStoreOptions options;
    options.path = (dir_.path() / "idem.db").string();
    auto opened = SqliteStore::Open(options);
    ASSERT_TRUE(opened) << opened.error().ToString();
    store_ = std::shared_ptr<SqliteStore>(std::move(*opened));
    db_ = std::make_unique<Db>(options.path);
    Exec("CREATE TABLE " + table_ + " (" + columns + ")");
  }

  std::shared_ptr<Store> store() override { return store_; }
  const std::string& table() const override { return table_; }
  void Exec(const std::string& sql) override { db_->Exec(sql.c_str()); }
  long long Count() override {
    return testing::SqliteCountRows(db_->db, table_);
  }
  bool InTransaction() override { return sqlite3_get_autocommit(db_->db) == 0; }
  Result<TransactionCompletion> CompleteInTransaction(
      const RecordId& id, const Token& token, const Response& r) override {
    return store_->CompleteInTransaction(db_->db, id, token, r);
  }
  Result<TransactionCompletion> CompleteWithoutConnection(
      const RecordId& id, const Token& token, const Response& r) override {
    return store_->CompleteInTransaction(nullptr, id, token, r);
  }
  std::unique_ptr<testing::AnySqlTransaction> Transaction() override {
    return std::make_unique<testing::AnySqlTransactionOf<SqliteTransaction>>(
        *store_, db_->db);
  }
  std::string begin_statement() const override { return "BEGIN IMMEDIATE"; }
  std::string no_transaction_error() const override {
    return "no transaction open";
  }
  bool takeover_while_open() const override { return false; }

  const testing::TempDir& dir() const { return dir_; }
  SqliteStore& sqlite_store() { return *store_; }
  sqlite3* db() const { return db_->db; }

  // For testing::LentSqlBackend.
  using LentTx = SqliteTransaction;
  using Handle = sqlite3*;
  static Handle LentConnection(const LentTx& tx) { return tx.db(); }
  static void ExecOn(Handle db, const std::string& sql) {
    idem::ExecOn(db, sql.c_str());
  }
  Handle own_connection() const { return db(); }
  SqliteStore& lending_store() { return *store_; }

 protected:
  testing::TempDir dir_{"idem-sqlite-tx"};
  std::string table_;
  std::shared_ptr<SqliteStore> store_;
  std::unique_ptr<Db> db_;
};

// The application's transaction on the store's writer
// (SqliteTransaction(store)).
class SqliteWriterSql : public testing::LentSqlBackend<SqliteSql> {
 public:
  // Whether this thread holds the store's writer: then a transaction on it
  // cannot begin (it can at once otherwise: the test has one thread).
  bool InTransaction() override {
    SqliteTransaction probe(*store_);
    return !probe.Begin().has_value();
  }
};

}  // namespace
}  // namespace idem

IDEM_INSTANTIATE_SQL_TRANSACTION_SUITES(
    Sqlite,
    SqlBackendFactory{
        .name = "sqlite",
        .make = [] { return std::make_unique<idem::SqliteSql>(); }},
    SqlBackendFactory{.name = "sqlite_writer", .make = [] {
                        return std::make_unique<idem::SqliteWriterSql>();
                      }});

namespace idem {
namespace {

using SqliteTransactionTest = testing::SqlTransactionFixtureOn<SqliteSql>;

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
  EXPECT_EQ(backend().Count(), 1);
}

TEST_F(SqliteTransactionTest, RefusesAnotherFileAndAnAttachedStoreFile) {
  const RecordId id = TestId(10);
  const Token token = ClaimAt(id, kT0);
  Db other((backend().dir().path() / "business.db").string());
  other.Exec("BEGIN IMMEDIATE");
  auto done = backend().sqlite_store().CompleteInTransaction(
      other.db, id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(done.error().message().find("not the store's file"),
            std::string::npos)
      << done.error().message();
  other.Exec("ROLLBACK");
  // The store's file ATTACHed to another main database is refused too: WAL
  // mode does not commit the two files atomically.
  const std::string attach =
      "ATTACH DATABASE '" + backend().sqlite_store().path() + "' AS idem";
  other.Exec(attach.c_str());
  other.Exec("BEGIN IMMEDIATE");
  done = backend().sqlite_store().CompleteInTransaction(other.db, id, token,
                                                        Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  other.Exec("ROLLBACK");
  auto record = store().Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
}

// A store opened by another name of its file (here "<dir>/./idem.db"):
// SQLite names the connection's main database by its normalized path, which
// differs from the store's, and the files are compared, not the names.
TEST_F(SqliteTransactionTest, AcceptsTheStoreFileByAnotherName) {
  SqliteStoreOptions options;
  options.path = (backend().dir().path() / "." / "idem.db").string();
  auto opened = SqliteStore::Open(options);
  ASSERT_TRUE(opened) << opened.error().ToString();
  SqliteStore& other_name = **opened;
  const RecordId id = TestId(11);
  const Token token = ClaimAt(id, kT0);
  Db app((backend().dir().path() / "idem.db").string());
  ASSERT_STRNE(sqlite3_db_filename(app.db, "main"), options.path.c_str());
  app.Exec("BEGIN IMMEDIATE");
  auto done = other_name.CompleteInTransaction(app.db, id, token, Created("x"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  app.Exec("COMMIT");
  auto record = store().Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kCompleted);
}

// The Guard's side: RunInTransaction tells the ClaimHandle, Finish makes no
// store call, and a takeover makes the first handler's transaction roll
// back while the second one's commits.
class SqliteGuardTransactionTest : public SqliteTransactionTest {
 protected:
  void SetUp() override {
    SqliteTransactionTest::SetUp();
    GuardSetup setup;
    setup.store = backend().store();
    setup.clock = clock_;
    setup.options.lock_timeout = kLock;
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard);
    guard_ = std::move(*guard);
  }

  Decision Begin() { return guard_->BeginWithKey("", "key", "transfer", "in"); }

  Result<Response> Transfer(ClaimHandle& claim, const char* id) {
    SqliteTransaction tx(backend().sqlite_store(), backend().db());
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
  EXPECT_EQ(backend().Count(), 1);
}

TEST_F(SqliteGuardTransactionTest, UnstoredStatusCommitsAndReleases) {
  Decision d = Begin();
  ASSERT_EQ(d.action, Action::kExecute);
  SqliteTransaction tx(backend().sqlite_store(), backend().db());
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
  EXPECT_EQ(backend().Count(), 0);  // Rolled back.
  EXPECT_EQ(first.claim.Finish(*lost), FinishResult::kStaleComplete);
  EXPECT_EQ(Count(Outcome::kStaleComplete), 1u);

  auto won = Transfer(second.claim, "second");
  ASSERT_TRUE(won);
  EXPECT_EQ(won->status, 201);
  EXPECT_EQ(second.claim.Finish(*won), FinishResult::kStored);
  EXPECT_EQ(backend().Count(), 1);
  Decision replay = Begin();
  ASSERT_EQ(replay.action, Action::kRespond);
  EXPECT_EQ(replay.response.body, "second");
}

TEST_F(SqliteGuardTransactionTest, HandlerThatThrowsRollsBackAndReleases) {
  Decision d = Begin();
  ASSERT_EQ(d.action, Action::kExecute);
  SqliteTransaction tx(backend().sqlite_store(), backend().db());
  EXPECT_THROW(sql::RunInTransaction(
                   tx, d.claim,
                   [](SqliteTransaction& t) -> Response {
                     sqlite3_exec(t.db(), "INSERT INTO transfers VALUES ('x')",
                                  nullptr, nullptr, nullptr);
                     throw std::runtime_error("boom");
                   }),
               std::runtime_error);
  EXPECT_EQ(sqlite3_get_autocommit(backend().db()), 1);
  EXPECT_EQ(backend().Count(), 0);
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
  EXPECT_EQ(backend().Count(), 1);
}

}  // namespace
}  // namespace idem
