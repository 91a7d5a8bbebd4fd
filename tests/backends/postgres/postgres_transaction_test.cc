// Exactly once on PostgreSQL: the SQL suites (backends/sql) on the shared
// test server (IDEM_TEST_POSTGRES_URI), tables of each test's own, and the
// cases only PostgreSQL has: a completion after a renewal, a failed
// transaction and another database refused, the store's table whatever the
// search_path, and a takeover while the first handler's transaction is open.

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "backends/sql/sql_transaction_suite.h"
#include "idem/guard.h"
#include "idem/postgres_store.h"
#include "idem/postgres_transaction.h"
#include "idem/sql_transaction.h"
#include "idem/store_uri.h"
#include "postgres_test_util.h"
#include "support/ids.h"

namespace idem {
namespace {

using std::chrono::seconds;
using testing::ConnectPostgres;
using testing::Created;
using testing::DropPostgresTable;
using testing::PostgresConnection;
using testing::PostgresTestUri;
using testing::TestFingerprint;
using testing::TestId;
using testing::TestToken;
using testing::UniquePostgresTable;
using testing::WithParams;

// A PostgresStore on a table of its own, and a connection of the
// application's own to the store's database.
class PostgresSql : public testing::SqlBackend {
 public:
  void SetUp(const std::string& table, const std::string& columns) override {
    IDEM_REQUIRE_TEST_POSTGRES();
    base_ = PostgresTestUri();
    store_table_ = UniquePostgresTable("idemtx");
    table_ = store_table_ + "_" + table;
    auto uri = StoreUri::Parse(
        WithParams(base_, "table=" + store_table_ + store_params()));
    ASSERT_TRUE(uri) << uri.error().ToString();
    auto opened = PostgresStore::OpenFromUri(*uri, {});
    ASSERT_TRUE(opened) << opened.error().ToString();
    store_.reset(static_cast<PostgresStore*>(opened->release()));
    conn_ = ConnectPostgres(base_);
    ASSERT_EQ(PQstatus(conn_.get()), CONNECTION_OK);
    Exec("CREATE TABLE " + table_ + " (" + columns + ")");
  }

  void TearDown() override {
    if (base_.empty()) return;
    conn_.reset();
    store_.reset();
    DropPostgresTable(base_, store_table_);
    DropPostgresTable(base_, table_);
  }

  std::shared_ptr<Store> store() override { return store_; }
  const std::string& table() const override { return table_; }
  void Exec(const std::string& sql) override { ExecOn(conn_.get(), sql); }
  long long Count() override {
    PGresult* r =
        PQexec(conn_.get(), ("SELECT count(*) FROM " + table_).c_str());
    const long long n = PQresultStatus(r) == PGRES_TUPLES_OK
                            ? std::stoll(PQgetvalue(r, 0, 0))
                            : -1;
    PQclear(r);
    return n;
  }
  bool InTransaction() override {
    return PQtransactionStatus(conn_.get()) != PQTRANS_IDLE;
  }
  Result<TransactionCompletion> CompleteInTransaction(
      const RecordId& id, const Token& token, const Response& r) override {
    return store_->CompleteInTransaction(conn_.get(), id, token, r);
  }
  Result<TransactionCompletion> CompleteWithoutConnection(
      const RecordId& id, const Token& token, const Response& r) override {
    return store_->CompleteInTransaction(nullptr, id, token, r);
  }
  std::unique_ptr<testing::AnySqlTransaction> Transaction() override {
    return std::make_unique<testing::AnySqlTransactionOf<PostgresTransaction>>(
        *store_, conn_.get());
  }
  std::string begin_statement() const override { return "BEGIN"; }
  std::string no_transaction_error() const override {
    return "not inside a transaction";
  }
  bool takeover_while_open() const override { return true; }

  // `sql` on `conn`; a failure fails the test.
  static void ExecOn(PGconn* conn, const std::string& sql) {
    PGresult* r = PQexec(conn, sql.c_str());
    const auto status = PQresultStatus(r);
    EXPECT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
        << sql << ": " << PQerrorMessage(conn);
    PQclear(r);
  }

  const std::string& base() const { return base_; }
  const std::string& store_table() const { return store_table_; }
  PostgresStore& postgres_store() { return *store_; }
  PGconn* conn() const { return conn_.get(); }

  // For testing::LentSqlBackend.
  using LentTx = PostgresTransaction;
  using Handle = PGconn*;
  static Handle LentConnection(const LentTx& tx) { return tx.conn(); }
  Handle own_connection() const { return conn(); }
  PostgresStore& lending_store() { return *store_; }

 protected:
  // More URI parameters for the store ("&name=value..."), if any.
  virtual std::string store_params() const { return ""; }

 private:
  std::string base_;
  std::string store_table_;
  std::string table_;
  std::shared_ptr<PostgresStore> store_;
  PostgresConnection conn_;
};

// The application's transaction on a connection the store lends
// (PostgresTransaction(store)). The pool is small, so that the suites'
// claims made while a transaction is open (a takeover) show that one
// connection is left for them.
class PostgresLentSql : public testing::LentSqlBackend<PostgresSql> {
 public:
  bool InTransaction() override {
    return open() != nullptr || PostgresSql::InTransaction();
  }

 protected:
  std::string store_params() const override {
    return "&pool=2&acquire_timeout_ms=300";
  }
};

}  // namespace
}  // namespace idem

IDEM_INSTANTIATE_SQL_TRANSACTION_SUITES(
    Postgres,
    SqlBackendFactory{
        .name = "postgres",
        .make = [] { return std::make_unique<idem::PostgresSql>(); }},
    SqlBackendFactory{.name = "postgres_lent", .make = [] {
                        return std::make_unique<idem::PostgresLentSql>();
                      }});

namespace idem {
namespace {

using PostgresTransactionTest = testing::SqlTransactionFixtureOn<PostgresSql>;

TEST_F(PostgresTransactionTest, RefusesAFailedTransactionAndAnotherDb) {
  const RecordId id = TestId(8);
  const Token token = ClaimAt(id, kT0);
  backend().Exec("BEGIN");
  PQclear(PQexec(backend().conn(), "SELECT no_such_column"));
  auto done = backend().CompleteInTransaction(id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  backend().Exec("ROLLBACK");

  // The server's maintenance database: not the store's.
  std::string other =
      backend().base().substr(0, backend().base().rfind('/')) + "/postgres";
  PostgresConnection elsewhere = ConnectPostgres(other);
  ASSERT_EQ(PQstatus(elsewhere.get()), CONNECTION_OK);
  PostgresSql::ExecOn(elsewhere.get(), "BEGIN");
  done = backend().postgres_store().CompleteInTransaction(elsewhere.get(), id,
                                                          token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(done.error().message().find("not the store's"), std::string::npos)
      << done.error().message();
  PostgresSql::ExecOn(elsewhere.get(), "ROLLBACK");

  auto record = store().Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
}

TEST_F(PostgresTransactionTest, WritesTheStoresTableWhateverTheSearchPath) {
  const RecordId id = TestId(9);
  const Token token = ClaimAt(id, kT0);
  backend().Exec("CREATE SCHEMA IF NOT EXISTS idem_tx_elsewhere");
  backend().Exec("SET search_path TO idem_tx_elsewhere");
  backend().Exec("BEGIN");
  auto done = backend().CompleteInTransaction(id, token, Created("x"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  backend().Exec("COMMIT");
  backend().Exec("RESET search_path");
  auto record = store().Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kCompleted);
}

// The completion of a claim this store does not remember reads the row
// first, in the caller's transaction: a row whose columns disagree with its
// record is kDataLoss there too, never "claim lost", and nothing is written.
TEST_F(PostgresTransactionTest, ADamagedRowReadByTheCompletionIsDataLoss) {
  const RecordId id = TestId(11);
  ClaimAt(id, kT0);
  backend().Exec("UPDATE " + backend().store_table() +
                 " SET locked_until = locked_until + 1");
  backend().Exec("BEGIN");
  auto done = backend().CompleteInTransaction(id, TestToken(99), Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kDataLoss);
  EXPECT_NE(done.error().message().find(backend().store_table()),
            std::string::npos)
      << done.error().message();
  backend().Exec("ROLLBACK");
}

// A takeover while the first handler's transaction is open: its completion
// finds the claim lost, it rolls back, and only the second one's row stays.
TEST_F(PostgresTransactionTest, TakeoverDuringTheOpenTransactionRollsItBack) {
  auto clock = std::make_shared<ManualClock>(kT0);
  GuardSetup setup;
  setup.store = backend().store();
  setup.clock = clock;
  setup.options.lock_timeout = kLock;
  auto guard = Guard::Create(std::move(setup));
  ASSERT_TRUE(guard);
  Decision first = (*guard)->BeginWithKey("", "key", "transfer", "in");
  ASSERT_EQ(first.action, Action::kExecute);

  PostgresConnection second_conn = ConnectPostgres(backend().base());
  ASSERT_EQ(PQstatus(second_conn.get()), CONNECTION_OK);
  PostgresTransaction tx(backend().postgres_store(), backend().conn());
  std::optional<Decision> second;
  auto sent = sql::RunInTransaction(tx, first.claim, [&](auto& t) {
    PostgresSql::ExecOn(
        t.conn(), "INSERT INTO " + backend().table() + " VALUES ('first')");
    // The first handler is slow: its lock times out, and a retry takes the
    // key over and completes, all while this transaction is open.
    clock->Advance(kLock + seconds(1));
    second.emplace((*guard)->BeginWithKey("", "key", "transfer", "in"));
    EXPECT_EQ(second->action, Action::kExecute);
    EXPECT_TRUE(second->claim.takeover());
    PostgresTransaction tx2(backend().postgres_store(), second_conn.get());
    auto won = sql::RunInTransaction(tx2, second->claim, [&](auto& t2) {
      PostgresSql::ExecOn(
          t2.conn(), "INSERT INTO " + backend().table() + " VALUES ('second')");
      return Created("second");
    });
    EXPECT_TRUE(won && won->status == 201);
    EXPECT_EQ(second->claim.Finish(*won), FinishResult::kStored);
    return Created("first");
  });
  ASSERT_TRUE(sent) << sent.error().ToString();
  EXPECT_EQ(sent->status, 409);
  EXPECT_EQ(first.claim.Finish(*sent), FinishResult::kStaleComplete);
  EXPECT_EQ(PQtransactionStatus(backend().conn()), PQTRANS_IDLE);
  EXPECT_EQ(backend().Count(), 1);
  Decision replay = (*guard)->BeginWithKey("", "key", "transfer", "in");
  ASSERT_EQ(replay.action, Action::kRespond);
  EXPECT_EQ(replay.response.body, "second");
}

// PostgresTransaction(store): the connection the store lends, and what
// becomes of it when the transaction ends.
class PostgresLentTest
    : public testing::SqlTransactionFixtureOn<PostgresLentSql> {
 protected:
  // Another store on the backend's table with more URI parameters.
  std::unique_ptr<PostgresStore> OpenStoreWith(const std::string& params) {
    auto uri = StoreUri::Parse(WithParams(
        backend().base(), "table=" + backend().store_table() + "&" + params));
    EXPECT_TRUE(uri) << uri.error().ToString();
    if (!uri) return nullptr;
    auto opened = PostgresStore::OpenFromUri(*uri, {});
    EXPECT_TRUE(opened) << opened.error().ToString();
    if (!opened) return nullptr;
    return std::unique_ptr<PostgresStore>(
        static_cast<PostgresStore*>(opened->release()));
  }

  // A store of one connection: a transaction's Begin gets the connection
  // the last one had when it went back to the pool (the same server
  // process, PQbackendPID), and a new one when it was closed.
  std::unique_ptr<PostgresStore> OpenSingleConnectionStore() {
    return OpenStoreWith("pool=1&acquire_timeout_ms=30000");
  }

  void Insert(PGconn* conn, const std::string& row) {
    PostgresSql::ExecOn(
        conn, "INSERT INTO " + backend().table() + " VALUES ('" + row + "')");
  }
};

TEST_F(PostgresLentTest, TheConnectionGoesBackToThePoolHoweverItEnds) {
  auto single = OpenSingleConnectionStore();
  ASSERT_NE(single, nullptr);
  PostgresTransaction tx(*single);
  EXPECT_EQ(tx.conn(), nullptr);
  ASSERT_TRUE(tx.Begin());
  ASSERT_NE(tx.conn(), nullptr);
  const int pid = PQbackendPID(tx.conn());
  Insert(tx.conn(), "committed");
  ASSERT_TRUE(tx.Commit());
  EXPECT_EQ(tx.conn(), nullptr);

  ASSERT_TRUE(tx.Begin());
  EXPECT_EQ(PQbackendPID(tx.conn()), pid);
  Insert(tx.conn(), "rolled back");
  tx.Rollback();
  EXPECT_EQ(tx.conn(), nullptr);

  // A failed statement: Commit rolls back and says so; an error in the
  // application's SQL costs no connection.
  ASSERT_TRUE(tx.Begin());
  EXPECT_EQ(PQbackendPID(tx.conn()), pid);
  Insert(tx.conn(), "failed");
  PQclear(PQexec(tx.conn(), "SELECT no_such_column"));
  auto committed = tx.Commit();
  ASSERT_FALSE(committed);
  EXPECT_EQ(committed.error().code(), ErrorCode::kInternal);
  EXPECT_NE(committed.error().message().find("rolled back"), std::string::npos)
      << committed.error().message();

  {  // Destroyed while open: rolled back.
    PostgresTransaction open(*single);
    ASSERT_TRUE(open.Begin());
    EXPECT_EQ(PQbackendPID(open.conn()), pid);
    Insert(open.conn(), "destroyed");
  }

  // The store's own calls run on the same connection again.
  auto claimed = single->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(claimed) << claimed.error().ToString();
  EXPECT_EQ(claimed->outcome, ClaimOutcome::kAcquired);
  ASSERT_TRUE(tx.Begin());
  EXPECT_EQ(PQbackendPID(tx.conn()), pid);
  tx.Rollback();
  EXPECT_EQ(backend().Count(), 1);
}

// What the application must not do on the lent connection and the store
// can see when the transaction ends: Commit fails with kInvalidArgument
// (its COMMIT would not mean what it says) and the connection is closed,
// never lent again with a session of unknown state.
TEST_F(PostgresLentTest,
       AConnectionLeftInAStateTheStoreCannotVouchForIsClosed) {
  auto single = OpenSingleConnectionStore();
  ASSERT_NE(single, nullptr);
  const std::vector<std::pair<std::string, std::function<void(PGconn*)>>>
      misuses = {
          {"its own COMMIT", [](PGconn* c) { PQclear(PQexec(c, "COMMIT")); }},
          {"blocking mode", [](PGconn* c) { PQsetnonblocking(c, 0); }},
          {"results unread",
           [](PGconn* c) { ASSERT_EQ(PQsendQuery(c, "SELECT 1"), 1); }},
          {"pipeline mode",
           [](PGconn* c) { ASSERT_EQ(PQenterPipelineMode(c), 1); }},
      };
  PostgresTransaction tx(*single);
  ASSERT_TRUE(tx.Begin());
  int pid = PQbackendPID(tx.conn());
  tx.Rollback();
  for (const auto& [name, misuse] : misuses) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(tx.Begin());
    EXPECT_EQ(PQbackendPID(tx.conn()), pid) << "a new connection each time";
    Insert(tx.conn(), name);
    misuse(tx.conn());
    auto committed = tx.Commit();
    ASSERT_FALSE(committed);
    EXPECT_EQ(committed.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(committed.error().message().find("closed"), std::string::npos)
        << committed.error().message();
    ASSERT_TRUE(tx.Begin());
    EXPECT_NE(PQbackendPID(tx.conn()), pid) << "the connection was kept";
    pid = PQbackendPID(tx.conn());
    tx.Rollback();
  }
  // Only the transaction the application committed itself left its row.
  EXPECT_EQ(backend().Count(), 1);
  auto claimed = single->Claim(TestId(2), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(claimed) << claimed.error().ToString();
  EXPECT_EQ(claimed->outcome, ClaimOutcome::kAcquired);
}

// DEALLOCATE ALL on the lent connection: the store's prepared completion
// is gone from the session. That one completion fails (the transaction
// rolls back, nothing is stored), the connection is closed, and the next
// call, on a new connection, prepares afresh.
TEST_F(PostgresLentTest, ADeallocatedStatementFailsOneCallOnly) {
  auto single = OpenSingleConnectionStore();
  ASSERT_NE(single, nullptr);
  // Prepare the claim and the completion on the store's one connection.
  auto first = single->Claim(TestId(3), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(first && first->outcome == ClaimOutcome::kAcquired);
  auto stored = single->Complete(TestId(3), first->token, Created("first"));
  ASSERT_TRUE(stored && *stored);
  auto second = single->Claim(TestId(4), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(second && second->outcome == ClaimOutcome::kAcquired);

  PostgresTransaction tx(*single);
  ASSERT_TRUE(tx.Begin());
  const int pid = PQbackendPID(tx.conn());
  Insert(tx.conn(), "deallocated");
  PostgresSql::ExecOn(tx.conn(), "DEALLOCATE ALL");
  auto done = single->CompleteInTransaction(tx.conn(), TestId(4), second->token,
                                            Created("second"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInternal);
  auto committed = tx.Commit();
  EXPECT_FALSE(committed);
  EXPECT_EQ(backend().Count(), 0);

  stored = single->Complete(TestId(4), second->token, Created("second"));
  ASSERT_TRUE(stored) << stored.error().ToString();
  EXPECT_TRUE(*stored);
  ASSERT_TRUE(tx.Begin());
  EXPECT_NE(PQbackendPID(tx.conn()), pid);
  tx.Rollback();
}

// The store's statements name its table with its schema: neither a SET
// LOCAL search_path nor a temporary table of the same name (which the
// default search_path looks at first) redirects the lent completion.
TEST_F(PostgresLentTest, SearchPathAndTempTablesDoNotRedirectTheStore) {
  const RecordId id = TestId(5);
  const Token token = ClaimAt(id, kT0);
  backend().Exec("CREATE SCHEMA IF NOT EXISTS idem_tx_elsewhere");
  PostgresTransaction tx(backend().postgres_store());
  ASSERT_TRUE(tx.Begin());
  PostgresSql::ExecOn(tx.conn(), "SET LOCAL search_path TO idem_tx_elsewhere");
  PostgresSql::ExecOn(tx.conn(),
                      "CREATE TEMP TABLE " + backend().store_table() +
                          " (LIKE public." + backend().store_table() +
                          ") ON COMMIT DROP");
  auto done = backend().postgres_store().CompleteInTransaction(
      tx.conn(), id, token, Created("x"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  ASSERT_TRUE(tx.Commit());
  auto record = store().Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kCompleted);
}

// Every connection lent: a Begin, and any call of the store's, fails after
// acquire_timeout with kUnavailable naming the open transactions; one
// ended, the store works again.
TEST_F(PostgresLentTest, EveryConnectionLentIsAClearErrorAfterAcquireTimeout) {
  PostgresStore& s = backend().postgres_store();  // pool=2, 300 ms.
  PostgresTransaction one(s), two(s), three(s);
  ASSERT_TRUE(one.Begin());
  ASSERT_TRUE(two.Begin());
  auto began = three.Begin();
  ASSERT_FALSE(began);
  EXPECT_EQ(began.error().code(), ErrorCode::kUnavailable);
  EXPECT_NE(began.error().message().find(
                "2 lent to open PostgresTransaction(store) transactions"),
            std::string::npos)
      << began.error().message();
  auto claimed = s.Claim(TestId(6), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_FALSE(claimed);
  EXPECT_EQ(claimed.error().code(), ErrorCode::kUnavailable);
  EXPECT_NE(claimed.error().message().find("2 lent"), std::string::npos)
      << claimed.error().message();
  one.Rollback();
  claimed = s.Claim(TestId(6), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(claimed) << claimed.error().ToString();
  EXPECT_EQ(claimed->outcome, ClaimOutcome::kAcquired);
}

TEST_F(PostgresLentTest, MisuseIsInvalidArgument) {
  PostgresTransaction tx(backend().postgres_store());
  auto committed = tx.Commit();
  ASSERT_FALSE(committed);
  EXPECT_EQ(committed.error().code(), ErrorCode::kInvalidArgument);
  tx.Rollback();  // Nothing open: nothing to do.
  ASSERT_TRUE(tx.Begin());
  auto again = tx.Begin();
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(tx.conn(), nullptr) << "the open transaction is kept";
  ASSERT_TRUE(tx.Commit());
}

// Threads race for the same keys, each winner inserting its row and
// completing the record in a transaction on a lent connection, on a pool
// smaller than the threads: every key's row once, every record completed.
TEST_F(PostgresLentTest, ThreadsRacingForKeysCompleteEachOnce) {
  auto s = OpenStoreWith("pool=3&acquire_timeout_ms=60000");
  ASSERT_NE(s, nullptr);
  constexpr int kThreads = 8;
  constexpr int kKeys = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kKeys; ++k) {
        const int key = (k + t * 5) % kKeys;  // Threads start apart.
        const RecordId id = TestId(100 + key);
        auto claimed = s->Claim(id, TestFingerprint(1), kT0, kTtl, kLock);
        ASSERT_TRUE(claimed) << claimed.error().ToString();
        if (claimed->outcome != ClaimOutcome::kAcquired) continue;
        PostgresTransaction tx(*s);
        auto began = tx.Begin();
        ASSERT_TRUE(began) << began.error().ToString();
        Insert(tx.conn(), "key-" + std::to_string(key));
        auto done = s->CompleteInTransaction(tx.conn(), id, claimed->token,
                                             Created(std::to_string(key)));
        ASSERT_TRUE(done) << done.error().ToString();
        EXPECT_EQ(*done, TransactionCompletion::kStored);
        auto committed = tx.Commit();
        EXPECT_TRUE(committed) << committed.error().ToString();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(backend().Count(), kKeys);
  for (int key = 0; key < kKeys; ++key) {
    auto record = s->Inspect(TestId(100 + key), kT0);
    ASSERT_TRUE(record && record->has_value());
    EXPECT_EQ((*record)->state, RecordState::kCompleted);
    EXPECT_EQ((*record)->response->body, std::to_string(key));
  }
}

}  // namespace
}  // namespace idem
