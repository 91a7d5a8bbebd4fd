// Exactly once on PostgreSQL: the SQL suites (backends/sql) on the shared
// test server (IDEM_TEST_POSTGRES_URI), tables of each test's own, and the
// cases only PostgreSQL has: a completion after a renewal, a failed
// transaction and another database refused, the store's table whatever the
// search_path, and a takeover while the first handler's transaction is open.

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

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
    auto uri = StoreUri::Parse(WithParams(base_, "table=" + store_table_));
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
  PostgresStore& postgres_store() { return *store_; }
  PGconn* conn() const { return conn_.get(); }

 private:
  std::string base_;
  std::string store_table_;
  std::string table_;
  std::shared_ptr<PostgresStore> store_;
  PostgresConnection conn_;
};

}  // namespace
}  // namespace idem

IDEM_INSTANTIATE_SQL_TRANSACTION_SUITES(
    Postgres, SqlBackendFactory{.name = "postgres", .make = [] {
                                  return std::make_unique<idem::PostgresSql>();
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

}  // namespace
}  // namespace idem
