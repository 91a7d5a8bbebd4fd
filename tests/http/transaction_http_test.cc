// The adapters' claim-taking handler forms over real HTTP, for each adapter
// (HttpServers(): Beast and RESTinio), on a real SQLite file: a handler
// completes the record in its own transaction with the adapter's
// RunInTransaction (idem/beast/transaction.h, idem/restinio/transaction.h),
// on a pool of its own, answering through its Responder
// (transaction_test_server.h). And idem-demo's POST /transfers, which is
// built that way, on each adapter.

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "http_test_util.h"
#include "idem/testing/status_matchers.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"
#include "transaction_test_server.h"

namespace idem::testing {
namespace {

using std::chrono::seconds;

constexpr Duration kLock = seconds(10);

class TransactionHttpTest : public HttpServerTest {
 protected:
  void SetUp() override {
    app_.path = (dir_.path() / "idem.db").string();
    SqliteStoreOptions options;
    options.path = app_.path;
    app_.store = std::shared_ptr<SqliteStore>(
        ValueOrThrow(SqliteStore::Open(options)).release());
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(app_.path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE transfers (id TEXT)", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    counting_ = std::make_shared<CountingStore>(app_.store);
  }
  void TearDown() override { app_.pool.join(); }

  void Start(GuardOptions options = {}) {
    options.lock_timeout = kLock;
    server_.emplace(GetParam(), counting_, clock_, options, &app_);
  }
  Response Send(const std::string& target, const std::string& body,
                std::optional<std::string> key) {
    return SendOnce(server_->port(), Post(target, body, std::move(key)));
  }
  std::uint64_t Count(Outcome o) { return server_->guard().metrics().Get(o); }

  TempDir dir_{"idem-tx-http"};
  App app_;
  std::shared_ptr<CountingStore> counting_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::optional<TxServer> server_;
};

TEST_P(TransactionHttpTest, CompletesInTheTransactionOnceAndReplays) {
  Start();
  for (const char* target : {"/tx", "/sync"}) {
    SCOPED_TRACE(target);
    const std::string key = std::string("\"k") + target + "\"";
    const Response first = Send(target, target + 1, key);
    EXPECT_EQ(first.result_int(), 201u) << first.body();
    EXPECT_FALSE(IsReplay(first));
    const Response again = Send(target, target + 1, key);
    EXPECT_EQ(again.result_int(), 201u);
    EXPECT_TRUE(IsReplay(again));
    EXPECT_EQ(again.body(), first.body());
  }
  EXPECT_EQ(app_.runs.load(), 2);
  EXPECT_EQ(app_.Rows(), 2);
  // Finish after the committed completion made no store call: a Complete
  // of the completed record would have counted stale_complete.
  EXPECT_EQ(Count(Outcome::kStaleComplete), 0u);
  EXPECT_EQ(Count(Outcome::kStoreFailed), 0u);
}

// The record completed in the transaction is what the adapter stores for the
// same response itself: the replays of /tx and /plain are alike, header for
// header.
TEST_P(TransactionHttpTest, StoresWhatTheAdapterItselfWouldStore) {
  Start();
  ASSERT_EQ(Send("/tx", "same", "\"a\"").result_int(), 201u);
  ASSERT_EQ(Send("/plain", "same", "\"b\"").result_int(), 201u);
  const Response tx = Send("/tx", "same", "\"a\"");
  const Response plain = Send("/plain", "same", "\"b\"");
  ASSERT_TRUE(IsReplay(tx));
  ASSERT_TRUE(IsReplay(plain));
  EXPECT_EQ(tx.result_int(), plain.result_int());
  EXPECT_EQ(tx.body(), plain.body());
  std::vector<std::pair<std::string, std::string>> a, b;
  for (const auto& f : tx) a.emplace_back(f.name_string(), f.value());
  for (const auto& f : plain) b.emplace_back(f.name_string(), f.value());
  EXPECT_EQ(a, b);
  EXPECT_EQ(HeaderOf(tx, "Location"), "/tx/same");
  EXPECT_FALSE(HasHeader(tx, "Set-Cookie"));  // Not a stored header.
  EXPECT_FALSE(HasHeader(tx, "X-Test"));
}

// Another request takes the key over while the first handler runs: the
// first's completion finds the claim lost, rolls back and answers 409; a
// retry replays the other's response; one row.
TEST_P(TransactionHttpTest, TakeoverWhileTheHandlerRunsAnswers409AndRollsBack) {
  Start();
  std::atomic<bool> once{false};
  std::optional<Response> other;
  app_.before_begin = [&] {
    if (once.exchange(true)) return;
    clock_->Advance(kLock + seconds(1));
    other = Send("/tx", "body", "\"k\"");
  };
  const Response first = Send("/tx", "body", "\"k\"");
  EXPECT_EQ(ProblemMismatch(first, 409, "idempotency_request_in_progress"), "");
  EXPECT_EQ(HeaderOf(first, "Retry-After"), "1");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->result_int(), 201u) << other->body();
  EXPECT_EQ(app_.Rows(), 1);
  EXPECT_EQ(Count(Outcome::kTakeover), 1u);
  EXPECT_EQ(Count(Outcome::kStaleComplete), 1u);
  const Response retry = Send("/tx", "body", "\"k\"");
  EXPECT_TRUE(IsReplay(retry));
  EXPECT_EQ(retry.body(), other->body());
  EXPECT_EQ(app_.runs.load(), 2);
}

// No key on an optional route: the claim is inactive, the work commits
// alone, and a repeat runs again.
TEST_P(TransactionHttpTest, UnprotectedRequestCommitsAlone) {
  Start();
  EXPECT_EQ(Send("/opt", "u", std::nullopt).result_int(), 201u);
  EXPECT_EQ(Send("/opt", "u", std::nullopt).result_int(), 201u);
  EXPECT_EQ(app_.runs.load(), 2);
  EXPECT_EQ(app_.Rows(), 2);
  EXPECT_EQ(Count(Outcome::kUnprotected), 2u);
}

TEST_P(TransactionHttpTest, HandlerThatThrowsRollsBackAndReleases) {
  Start();
  app_.fail_next = true;
  const Response failed = Send("/tx", "f", "\"f\"");
  EXPECT_EQ(failed.result_int(), 500u);
  EXPECT_EQ(app_.Rows(), 0);
  EXPECT_EQ(Count(Outcome::kReleased), 1u);
  const Response retry = Send("/tx", "f", "\"f\"");
  EXPECT_EQ(retry.result_int(), 201u);
  EXPECT_FALSE(IsReplay(retry));
  EXPECT_EQ(app_.Rows(), 1);
  EXPECT_EQ(app_.runs.load(), 2);
}

// The renewal timer renews the claim while a claim-taking handler runs.
TEST_P(TransactionHttpTest, RenewalGoesOnWhileTheHandlerRuns) {
  GuardOptions options;
  options.lock_renewal = std::chrono::milliseconds(50);
  Start(options);
  bool renewed = false;
  app_.before_begin = [&] {
    renewed = WaitFor([&] { return counting_->extends.load() >= 2; },
                      std::chrono::seconds(60));
  };
  // A renewal starts while the transaction is open and waits for its lock;
  // it ends after the commit completed the record, and must not report the
  // claim lost. (SQLite's busy handler wakes it up to 100 ms late, after the
  // adapter's Finish ended the lease anyway; on PostgreSQL, whose row lock
  // wakes it at once, what keeps it quiet is that the completion stopped
  // renewing, ClaimHandle::StopRenewal.)
  bool blocked = false;
  app_.in_transaction = [&] {
    const int before = counting_->extends.load();
    blocked = WaitFor([&] { return counting_->extends.load() > before; },
                      std::chrono::seconds(60));
  };
  EXPECT_EQ(Send("/tx", "r", "\"r\"").result_int(), 201u);
  EXPECT_TRUE(renewed);
  EXPECT_TRUE(blocked);
  EXPECT_TRUE(
      WaitFor([&] { return counting_->extends_done == counting_->extends; },
              std::chrono::seconds(60)));
  EXPECT_EQ(Count(Outcome::kRenewalLost), 0u);
  EXPECT_TRUE(IsReplay(Send("/tx", "r", "\"r\"")));
  EXPECT_EQ(app_.Rows(), 1);
}

// idem-demo's POST /transfers behind each adapter (its claim-taking
// completion form): protected like /orders, key required, exactly once with
// --exactly-once; GET /transfers/count unprotected; 501 without SQL.
class DemoTransfersTest : public HttpServerTest {};

TEST_P(DemoTransfersTest, ProtectedByTheAdapterWithASqlStore) {
  TempDir dir("idem-demo-transfers");
  for (bool exactly_once : {false, true}) {
    SCOPED_TRACE(exactly_once);
    demo::DemoOptions options = On();
    options.store_uri =
        "sqlite:" + (dir.path() / (exactly_once ? "x.db" : "p.db")).string();
    options.exactly_once = exactly_once;
    DemoServer server(options);
    EXPECT_EQ(ProblemMismatch(SendOnce(server.port(),
                                       Post("/transfers", "{}", std::nullopt)),
                              400, "idempotency_key_missing"),
              "");
    const Response first =
        SendOnce(server.port(), Post("/transfers", "{}", "\"t1\""));
    EXPECT_EQ(first.result_int(), 201u) << first.body();
    const Response again =
        SendOnce(server.port(), Post("/transfers", "{}", "\"t1\""));
    EXPECT_TRUE(IsReplay(again));
    EXPECT_EQ(again.body(), first.body());
    EXPECT_EQ(HeaderOf(again, "Location"), HeaderOf(first, "Location"));
    EXPECT_EQ(Json(SendOnce(server.port(), Get("/transfers/count")))["count"],
              1);
    EXPECT_EQ(server.handler_runs(), 1u);
    EXPECT_EQ(server.Count(Outcome::kReplayed), 1u);
    EXPECT_EQ(server.Count(Outcome::kStaleComplete), 0u);
    EXPECT_EQ(SendOnce(server.port(), Get("/transfers")).result_int(), 405u);
  }
}

TEST_P(DemoTransfersTest, AStoreWithoutSqlAnswers501) {
  DemoServer server(On());
  EXPECT_EQ(
      SendOnce(server.port(), Post("/transfers", "{}", "\"t\"")).result_int(),
      501u);
  EXPECT_EQ(SendOnce(server.port(), Post("/transfers", "{}", std::nullopt))
                .result_int(),
            501u);
  EXPECT_EQ(SendOnce(server.port(), Get("/transfers/count")).result_int(),
            501u);
  EXPECT_EQ(server.handler_runs(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Servers, DemoTransfersTest,
                         ::testing::ValuesIn(HttpServers()),
                         HttpServerParamName);

INSTANTIATE_TEST_SUITE_P(Servers, TransactionHttpTest,
                         ::testing::ValuesIn(HttpServers()),
                         HttpServerParamName);

}  // namespace
}  // namespace idem::testing
