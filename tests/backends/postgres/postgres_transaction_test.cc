// Exactly once on PostgreSQL: PostgresStore::CompleteInTransaction, the
// fencing token checked inside the caller's transaction on its own
// connection, the connections it refuses, and sql::RunInTransaction with a
// Guard, including a takeover while the first handler's transaction is open.
// Shared test server (IDEM_TEST_POSTGRES_URI), tables of each test's own.

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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
using testing::DropPostgresTable;
using testing::PostgresConnection;
using testing::PostgresTestUri;
using testing::TestFingerprint;
using testing::TestId;
using testing::TestToken;
using testing::UniquePostgresTable;
using testing::WithParams;

constexpr Duration kTtl = std::chrono::hours(1);
constexpr Duration kLock = seconds(10);
const TimePoint kT0 = TimePoint(std::chrono::hours(24 * 365 * 50));

Response Created(std::string body) {
  Response r;
  r.status = 201;
  r.headers = {{"Content-Type", "application/json"}};
  r.body = std::move(body);
  return r;
}

class PostgresTransactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IDEM_REQUIRE_TEST_POSTGRES();
    base_ = PostgresTestUri();
    table_ = UniquePostgresTable("idemtx");
    business_ = table_ + "_transfers";
    auto uri = StoreUri::Parse(WithParams(base_, "table=" + table_));
    ASSERT_TRUE(uri) << uri.error().ToString();
    auto opened = PostgresStore::OpenFromUri(*uri, {});
    ASSERT_TRUE(opened) << opened.error().ToString();
    store_.reset(static_cast<PostgresStore*>(opened->release()));
    conn_ = ConnectPostgres(base_);
    ASSERT_EQ(PQstatus(conn_.get()), CONNECTION_OK);
    Exec("CREATE TABLE " + business_ + " (id text PRIMARY KEY)");
  }

  void TearDown() override {
    if (base_.empty()) return;
    conn_.reset();
    store_.reset();
    DropPostgresTable(base_, table_);
    DropPostgresTable(base_, business_);
  }

  void Exec(const std::string& sql, PGconn* c = nullptr) {
    PGresult* r = PQexec(c ? c : conn_.get(), sql.c_str());
    const auto status = PQresultStatus(r);
    EXPECT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
        << sql << ": " << PQerrorMessage(c ? c : conn_.get());
    PQclear(r);
  }

  long long Count() {
    PGresult* r =
        PQexec(conn_.get(), ("SELECT count(*) FROM " + business_).c_str());
    const long long n = PQresultStatus(r) == PGRES_TUPLES_OK
                            ? std::stoll(PQgetvalue(r, 0, 0))
                            : -1;
    PQclear(r);
    return n;
  }

  Token ClaimAt(const RecordId& id, TimePoint now) {
    auto claimed = store_->Claim(id, TestFingerprint(1), now, kTtl, kLock);
    EXPECT_TRUE(claimed) << claimed.error().ToString();
    EXPECT_EQ(claimed->outcome, ClaimOutcome::kAcquired);
    return claimed->token;
  }

  Result<TransactionCompletion> CompleteAndCommit(const RecordId& id,
                                                  const Token& token,
                                                  const Response& r) {
    Exec("BEGIN");
    Exec("INSERT INTO " + business_ + " VALUES (md5(random()::text))");
    auto done = store_->CompleteInTransaction(conn_.get(), id, token, r);
    Exec(done && *done == TransactionCompletion::kStored ? "COMMIT"
                                                         : "ROLLBACK");
    return done;
  }

  std::string base_;
  std::string table_;
  std::string business_;
  std::unique_ptr<PostgresStore> store_;
  PostgresConnection conn_;
};

TEST_F(PostgresTransactionTest, StoredAndVisibleOnlyAfterCommit) {
  const RecordId id = TestId(1);
  const Token token = ClaimAt(id, kT0);
  Exec("BEGIN");
  Exec("INSERT INTO " + business_ + " VALUES ('a')");
  auto done =
      store_->CompleteInTransaction(conn_.get(), id, token, Created("x"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  auto before = store_->Inspect(id, kT0);
  ASSERT_TRUE(before && before->has_value());
  EXPECT_EQ((*before)->state, RecordState::kInProgress);
  Exec("COMMIT");
  auto after = store_->Inspect(id, kT0);
  ASSERT_TRUE(after && after->has_value());
  EXPECT_EQ((*after)->state, RecordState::kCompleted);
  EXPECT_EQ(*(*after)->response, Created("x"));
  EXPECT_EQ(Count(), 1);
}

// The claim memo remembers the claim's locked_until; a renewal moves the
// column. The completion writes both together, so the completed record
// still agrees with its columns and reads back (not kDataLoss).
TEST_F(PostgresTransactionTest, ACompletionAfterARenewalStaysReadable) {
  const RecordId id = TestId(7);
  const Token token = ClaimAt(id, kT0);
  auto renewed = store_->ExtendLock(id, token, kT0 + kLock / 2, kLock);
  ASSERT_TRUE(renewed) << renewed.error().ToString();
  ASSERT_TRUE(*renewed);
  auto done = CompleteAndCommit(id, token, Created("renewed"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  auto after = store_->Inspect(id, kT0 + kLock);
  ASSERT_TRUE(after) << after.error().ToString();
  ASSERT_TRUE(after->has_value());
  EXPECT_EQ((*after)->state, RecordState::kCompleted);
  EXPECT_EQ(*(*after)->response, Created("renewed"));
  auto replay = store_->Claim(id, TestFingerprint(1), kT0 + kLock, kTtl, kLock);
  ASSERT_TRUE(replay) << replay.error().ToString();
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
}

TEST_F(PostgresTransactionTest, RollbackLeavesTheClaimToRelease) {
  const RecordId id = TestId(2);
  const Token token = ClaimAt(id, kT0);
  Exec("BEGIN");
  auto done =
      store_->CompleteInTransaction(conn_.get(), id, token, Created("x"));
  ASSERT_TRUE(done && *done == TransactionCompletion::kStored);
  Exec("ROLLBACK");
  auto released = store_->Release(id, token);
  ASSERT_TRUE(released);
  EXPECT_TRUE(*released);
}

TEST_F(PostgresTransactionTest, WrongTokenExpiredReleasedRevokedTwiceAreLost) {
  const RecordId wrong = TestId(3);
  ClaimAt(wrong, kT0);
  auto done = CompleteAndCommit(wrong, TestToken(99), Created("x"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);

  const RecordId expired = TestId(4);
  const Token t1 = ClaimAt(expired, kT0);
  ClaimAt(expired, kT0 + kTtl + seconds(1));
  done = CompleteAndCommit(expired, t1, Created("x"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);

  const RecordId released = TestId(5);
  const Token t2 = ClaimAt(released, kT0);
  ASSERT_TRUE(store_->Release(released, t2));
  done = CompleteAndCommit(released, t2, Created("x"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);

  const RecordId revoked = TestId(6);
  const Token t3 = ClaimAt(revoked, kT0);
  ASSERT_TRUE(store_->Revoke(revoked));
  done = CompleteAndCommit(revoked, t3, Created("x"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);

  const RecordId twice = TestId(7);
  const Token t4 = ClaimAt(twice, kT0);
  done = CompleteAndCommit(twice, t4, Created("one"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  done = CompleteAndCommit(twice, t4, Created("two"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);
  auto record = store_->Inspect(twice, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->response->body, "one");
  EXPECT_EQ(Count(), 1);
}

TEST_F(PostgresTransactionTest, RefusesNoTransactionAFailedOneAndAnotherDb) {
  const RecordId id = TestId(8);
  const Token token = ClaimAt(id, kT0);
  auto done =
      store_->CompleteInTransaction(conn_.get(), id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(done.error().message().find("not inside a transaction"),
            std::string::npos)
      << done.error().message();

  Exec("BEGIN");
  PQclear(PQexec(conn_.get(), "SELECT no_such_column"));
  done = store_->CompleteInTransaction(conn_.get(), id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  Exec("ROLLBACK");

  // The server's maintenance database: not the store's.
  std::string other = base_.substr(0, base_.rfind('/')) + "/postgres";
  PostgresConnection elsewhere = ConnectPostgres(other);
  ASSERT_EQ(PQstatus(elsewhere.get()), CONNECTION_OK);
  Exec("BEGIN", elsewhere.get());
  done =
      store_->CompleteInTransaction(elsewhere.get(), id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(done.error().message().find("not the store's"), std::string::npos)
      << done.error().message();
  Exec("ROLLBACK", elsewhere.get());

  done = store_->CompleteInTransaction(nullptr, id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  auto record = store_->Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
}

TEST_F(PostgresTransactionTest, WritesTheStoresTableWhateverTheSearchPath) {
  const RecordId id = TestId(9);
  const Token token = ClaimAt(id, kT0);
  Exec("CREATE SCHEMA IF NOT EXISTS idem_tx_elsewhere");
  Exec("SET search_path TO idem_tx_elsewhere");
  Exec("BEGIN");
  auto done =
      store_->CompleteInTransaction(conn_.get(), id, token, Created("x"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  Exec("COMMIT");
  Exec("RESET search_path");
  auto record = store_->Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kCompleted);
}

// A takeover while the first handler's transaction is open: its completion
// finds the claim lost, it rolls back, and only the second one's row stays.
TEST_F(PostgresTransactionTest, TakeoverDuringTheOpenTransactionRollsItBack) {
  auto clock = std::make_shared<ManualClock>(kT0);
  GuardSetup setup;
  setup.store = std::shared_ptr<Store>(store_.get(), [](Store*) {});
  setup.clock = clock;
  setup.options.lock_timeout = kLock;
  auto guard = Guard::Create(std::move(setup));
  ASSERT_TRUE(guard);
  Decision first = (*guard)->BeginWithKey("", "key", "transfer", "in");
  ASSERT_EQ(first.action, Action::kExecute);

  PostgresConnection second_conn = ConnectPostgres(base_);
  ASSERT_EQ(PQstatus(second_conn.get()), CONNECTION_OK);
  PostgresTransaction tx(*store_, conn_.get());
  std::optional<Decision> second;
  auto sent = sql::RunInTransaction(tx, first.claim, [&](auto& t) {
    Exec("INSERT INTO " + business_ + " VALUES ('first')", t.conn());
    // The first handler is slow: its lock times out, and a retry takes the
    // key over and completes, all while this transaction is open.
    clock->Advance(kLock + seconds(1));
    second.emplace((*guard)->BeginWithKey("", "key", "transfer", "in"));
    EXPECT_EQ(second->action, Action::kExecute);
    EXPECT_TRUE(second->claim.takeover());
    PostgresTransaction tx2(*store_, second_conn.get());
    auto won = sql::RunInTransaction(tx2, second->claim, [&](auto& t2) {
      Exec("INSERT INTO " + business_ + " VALUES ('second')", t2.conn());
      return Created("second");
    });
    EXPECT_TRUE(won && won->status == 201);
    EXPECT_EQ(second->claim.Finish(*won), FinishResult::kStored);
    return Created("first");
  });
  ASSERT_TRUE(sent) << sent.error().ToString();
  EXPECT_EQ(sent->status, 409);
  EXPECT_EQ(first.claim.Finish(*sent), FinishResult::kStaleComplete);
  EXPECT_EQ(PQtransactionStatus(conn_.get()), PQTRANS_IDLE);
  EXPECT_EQ(Count(), 1);
  Decision replay = (*guard)->BeginWithKey("", "key", "transfer", "in");
  ASSERT_EQ(replay.action, Action::kRespond);
  EXPECT_EQ(replay.response.body, "second");
}

}  // namespace
}  // namespace idem
