// sql::RunOnceInTransaction on the shared PostgreSQL server: the job's row
// and its record's completion commit together, a repeat replays without
// running the work, a takeover while the transaction is open makes it roll
// back (kAborted), a throw rolls back and releases, and a value over
// max_stored_response commits alone. Tables of each test's own.

#include <libpq-fe.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "idem/guard.h"
#include "idem/postgres_store.h"
#include "idem/postgres_transaction.h"
#include "idem/sql_once.h"
#include "idem/store_uri.h"
#include "postgres_test_util.h"

namespace idem {
namespace {

using std::chrono::seconds;
using testing::ConnectPostgres;
using testing::DropPostgresTable;
using testing::PostgresConnection;
using testing::PostgresTestUri;
using testing::UniquePostgresTable;
using testing::WithParams;

constexpr Duration kLock = seconds(10);
const TimePoint kT0 = TimePoint(std::chrono::hours(24 * 365 * 50));

class PostgresOnceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IDEM_REQUIRE_TEST_POSTGRES();
    base_ = PostgresTestUri();
    table_ = UniquePostgresTable("idemonce");
    business_ = table_ + "_charges";
    auto uri = StoreUri::Parse(WithParams(base_, "table=" + table_));
    ASSERT_TRUE(uri) << uri.error().ToString();
    auto opened = PostgresStore::OpenFromUri(*uri, {});
    ASSERT_TRUE(opened) << opened.error().ToString();
    store_.reset(static_cast<PostgresStore*>(opened->release()));
    conn_ = ConnectPostgres(base_);
    ASSERT_EQ(PQstatus(conn_.get()), CONNECTION_OK);
    Exec("CREATE TABLE " + business_ + " (id text)");
    Rebuild(GuardOptions{});
  }

  void TearDown() override {
    if (base_.empty()) return;
    guard_.reset();
    conn_.reset();
    store_.reset();
    DropPostgresTable(base_, table_);
    DropPostgresTable(base_, business_);
  }

  void Rebuild(GuardOptions options) {
    options.lock_timeout = kLock;
    GuardSetup setup;
    setup.store = std::shared_ptr<Store>(store_.get(), [](Store*) {});
    setup.clock = clock_;
    setup.options = std::move(options);
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard);
    guard_ = std::move(*guard);
  }

  void Exec(const std::string& sql, PGconn* c = nullptr) {
    PGresult* r = PQexec(c ? c : conn_.get(), sql.c_str());
    EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK)
        << sql << ": " << PQerrorMessage(c ? c : conn_.get());
    PQclear(r);
  }

  long long Rows() {
    PGresult* r =
        PQexec(conn_.get(), ("SELECT count(*) FROM " + business_).c_str());
    const long long n = PQresultStatus(r) == PGRES_TUPLES_OK
                            ? std::stoll(PQgetvalue(r, 0, 0))
                            : -1;
    PQclear(r);
    return n;
  }

  // `during` runs inside the open transaction, after the insert.
  Result<OnceResult> Charge(std::function<void()> during = {},
                            bool fail = false) {
    PostgresTransaction tx(*store_, conn_.get());
    return sql::RunOnceInTransaction(
        *guard_, tx, "billing", "msg-1", "charge", "42 EUR",
        [&](PostgresTransaction& t) {
          ++runs_;
          Exec("INSERT INTO " + business_ + " VALUES ('c')", t.conn());
          if (during) during();
          if (fail) throw std::runtime_error("declined");
          return "receipt-" + std::to_string(runs_);
        });
  }

  std::string base_;
  std::string table_;
  std::string business_;
  std::unique_ptr<PostgresStore> store_;
  PostgresConnection conn_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kT0);
  std::unique_ptr<Guard> guard_;
  int runs_ = 0;
};

TEST_F(PostgresOnceTest, CommittedIsStoredAndARepeatReplaysWithoutTheWork) {
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

TEST_F(PostgresOnceTest, TakeoverDuringTheTransactionRollsItBackAsAborted) {
  Decision other;
  auto lost = Charge([&] {
    // The work is slow: its lock times out and another run takes the key
    // over, while this transaction is open.
    clock_->Advance(kLock + seconds(1));
    other = guard_->BeginWithKey("billing", "msg-1", "charge", "42 EUR");
    ASSERT_EQ(other.action, Action::kExecute);
    EXPECT_TRUE(other.claim.takeover());
  });
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code(), ErrorCode::kAborted);
  EXPECT_EQ(PQtransactionStatus(conn_.get()), PQTRANS_IDLE);
  EXPECT_EQ(Rows(), 0);
  EXPECT_EQ(guard_->metrics().Get(Outcome::kStaleComplete), 1u);
  Response theirs;
  theirs.body = "theirs";
  EXPECT_EQ(other.claim.Finish(theirs), FinishResult::kStored);
  auto retry = Charge();
  ASSERT_TRUE(retry) << retry.error().ToString();
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->value, "theirs");
  EXPECT_EQ(runs_, 1);
}

TEST_F(PostgresOnceTest, WorkThatThrowsRollsBackAndReleases) {
  EXPECT_THROW(Charge({}, /*fail=*/true), std::runtime_error);
  EXPECT_EQ(PQtransactionStatus(conn_.get()), PQTRANS_IDLE);
  EXPECT_EQ(Rows(), 0);
  auto retry = Charge();
  ASSERT_TRUE(retry) << retry.error().ToString();
  EXPECT_EQ(retry->storage, OnceStorage::kStored);
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(Rows(), 1);
}

TEST_F(PostgresOnceTest, AValueOverMaxStoredResponseCommitsAlone) {
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
}  // namespace idem
