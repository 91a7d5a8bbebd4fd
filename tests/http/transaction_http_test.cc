// The adapters' claim-taking handler forms over real HTTP, for each adapter
// (HttpServers(): Beast and RESTinio), on a real SQLite file: a handler
// completes the record in its own transaction with the adapter's
// RunInTransaction (idem/beast/transaction.h, idem/restinio/transaction.h),
// on a pool of its own, answering through its Responder.
//
//   POST /tx     completion form with the claim: inserts a row and answers
//                201 in the transaction
//   POST /sync   the synchronous form with the claim, the same
//   POST /plain  the same answer without a transaction or claim: what the
//                adapter itself stores
//   POST /opt    as /tx, the key optional
//
// And idem-demo's POST /transfers, which is built that way, on each adapter.

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <sqlite3.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "http_test_util.h"
#include "idem/beast/convert.h"
#include "idem/beast/transaction.h"
#include "idem/forwarding_store.h"
#include "idem/sqlite_store.h"
#include "idem/sqlite_transaction.h"
#include "support/status_matchers.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"
#if IDEM_DEMO_WITH_RESTINIO
#include <restinio/all.hpp>

#include "idem/restinio/idempotent_handler.h"
#include "idem/restinio/transaction.h"
#endif

namespace idem::testing {
namespace {

using std::chrono::seconds;
namespace net = boost::asio;

constexpr Duration kLock = seconds(10);

// Counts the Guard's renewals (ExtendLock) of the SQLite store.
class CountingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) override {
    ++extends;
    auto renewed = ForwardingStore::ExtendLock(id, token, now, lock_timeout);
    ++extends_done;
    return renewed;
  }
  std::atomic<int> extends{0};
  std::atomic<int> extends_done{0};
};

// SqliteTransaction on a connection of its own, with a hook before BEGIN:
// the store's own writes wait for BEGIN IMMEDIATE's lock, so what races the
// handler (a takeover) comes while it runs, before its transaction opens.
class HookedTx {
 public:
  HookedTx(SqliteStore& store, const std::string& path,
           const std::function<void()>& before_begin)
      : before_begin_(before_begin) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 30000);
    tx_.emplace(store, db_);
  }
  ~HookedTx() { sqlite3_close(db_); }
  Status Begin() {
    if (before_begin_) before_begin_();
    return tx_->Begin();
  }
  Status Commit() { return tx_->Commit(); }
  void Rollback() { tx_->Rollback(); }
  Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                         const idem::Response& stored) {
    return tx_->Complete(claim, stored);
  }
  sqlite3* db() const { return db_; }

 private:
  const std::function<void()>& before_begin_;
  sqlite3* db_ = nullptr;
  std::optional<SqliteTransaction> tx_;
};

// The application: its rows, its answer, its pool.
struct App {
  std::shared_ptr<SqliteStore> store;
  std::string path;
  std::function<void()> before_begin;    // Set before the requests.
  std::function<void()> in_transaction;  // After the insert.
  std::atomic<bool> fail_next{false};    // The next work throws.
  std::atomic<int> runs{0};
  net::thread_pool pool{2};

  // The answer, fixed by the request body: two routes store alike.
  static idem::Response Created(const std::string& body) {
    return idem::Response{201,
                          {{"Content-Type", "application/json"},
                           {"Location", "/tx/" + body},
                           {"Set-Cookie", "session=1"},
                           {"X-Test", "not stored"}},
                          "{\"t\":\"" + body + "\"}"};
  }
  // Inside the transaction: the row, then the answer (or a throw).
  idem::Response Insert(sqlite3* db, const std::string& body) {
    ++runs;
    const std::string sql = "INSERT INTO transfers VALUES ('" + body + "')";
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr),
              SQLITE_OK);
    if (in_transaction) in_transaction();
    if (fail_next.exchange(false)) throw std::runtime_error("work failed");
    return Created(body);
  }
  long long Rows() {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_stmt* stmt = nullptr;
    long long n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM transfers", -1, &stmt,
                           nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      n = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return n;
  }
};

idem::Response Failed(const Error& error) {
  return idem::Response{500, {}, error.message()};
}

std::shared_ptr<const GuardOptions> OptionalKey(GuardOptions options) {
  options.key_required = false;
  return ValueOrThrow(Guard::MakeRouteOptions(options));
}

// The Beast handler: the claim-taking forms over beast::RunInTransaction.
beast::Handler BeastHandler(App* app) {
  return [app](beast::Request req, ClaimHandle& claim, beast::Responder done) {
    const std::string path(beast::ToStd(req.target()));
    if (path == "/plain") {
      done(beast::ToBeast(App::Created(req.body()), req.version(),
                          req.keep_alive()));
      return;
    }
    net::post(app->pool, [app, req = std::move(req), &claim,
                          done = std::move(done)]() mutable {
      try {
        HookedTx tx(*app->store, app->path, app->before_begin);
        auto res = beast::RunInTransaction(tx, claim, [&](HookedTx& t) {
          return beast::ToBeast(app->Insert(t.db(), req.body()), req.version(),
                                req.keep_alive());
        });
        done(res ? std::move(*res)
                 : beast::ToBeast(Failed(res.error()), 11, false));
      } catch (...) {
        done.Fail(std::current_exception());
      }
    });
  };
}

beast::Handler BeastSyncHandler(App* app) {
  return [app](beast::Request req, ClaimHandle& claim) {
    HookedTx tx(*app->store, app->path, app->before_begin);
    auto res = beast::RunInTransaction(tx, claim, [&](HookedTx& t) {
      return beast::ToBeast(app->Insert(t.db(), req.body()), req.version(),
                            req.keep_alive());
    });
    return res ? std::move(*res)
               : beast::ToBeast(Failed(res.error()), 11, false);
  };
}

// One adapter's server around App on 127.0.0.1:0.
class TxServer {
 public:
  TxServer(demo::HttpFramework http, std::shared_ptr<Store> store,
           std::shared_ptr<Clock> clock, GuardOptions options, App* app) {
    if (http == demo::HttpFramework::kBeast) {
      beast::Handler tx = BeastHandler(app);
      beast::Handler sync = BeastSyncHandler(app);
      auto optional = OptionalKey(options);
      beast_ = std::make_unique<AdapterServer>(
          store, options,
          [tx, sync](beast::Request r, ClaimHandle& claim) {
            return beast::ToStd(r.target()) == "/sync"
                       ? sync(std::move(r), claim)
                       : tx(std::move(r), claim);
          },
          [&](beast::IdempotentHandler& h) {
            for (const char* path : {"/tx", "/plain", "/sync"}) {
              ValueOrThrow(h.Protect(http::verb::post, path));
            }
            ValueOrThrow(h.Protect(http::verb::post, "/opt", optional));
          },
          beast::IdempotentHandlerOptions{}, std::move(clock));
      return;
    }
#if IDEM_DEMO_WITH_RESTINIO
    StartRestinio(std::move(store), std::move(clock), std::move(options), app);
#endif
  }
  ~TxServer();

  std::uint16_t port() const {
    return beast_ ? beast_->port() : restinio_port_.load();
  }
  Guard& guard() { return beast_ ? beast_->guard() : *guard_; }

 private:
#if IDEM_DEMO_WITH_RESTINIO
  using Traits = ::restinio::traits_t<::restinio::asio_timer_manager_t,
                                      ::restinio::null_logger_t>;
  void StartRestinio(std::shared_ptr<Store> store, std::shared_ptr<Clock> clock,
                     GuardOptions options, App* app);
  // Its shutdown destroys the connections still waiting on I/O while the
  // server they report to exists.
  struct IoContext : net::io_context {
    using net::execution_context::shutdown;
  };
  IoContext ioc_;
  std::unique_ptr<restinio::IdempotentHandler> idem_;
  std::unique_ptr<::restinio::http_server_t<Traits>> server_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::thread io_;
#endif
  std::shared_ptr<Guard> guard_;
  std::atomic<std::uint16_t> restinio_port_{0};
  std::unique_ptr<AdapterServer> beast_;
};

#if IDEM_DEMO_WITH_RESTINIO
void TxServer::StartRestinio(std::shared_ptr<Store> store,
                             std::shared_ptr<Clock> clock, GuardOptions options,
                             App* app) {
  GuardSetup setup;
  setup.store = std::move(store);
  setup.clock = std::move(clock);
  setup.options = options;
  setup.log = [](LogLevel, std::string_view) {};
  guard_ = ValueOrThrow(Guard::Create(std::move(setup)));
  idem_ = ValueOrThrow(
      restinio::IdempotentHandler::Create(guard_, ioc_.get_executor()));
  restinio::Handler tx = [app](restinio::RequestHandle req, ClaimHandle& claim,
                               restinio::Responder done) {
    net::post(app->pool, [app, req, &claim, done = std::move(done)]() mutable {
      try {
        HookedTx tx(*app->store, app->path, app->before_begin);
        auto res = restinio::RunInTransaction(tx, claim, [&](HookedTx& t) {
          return app->Insert(t.db(), req->body());
        });
        done(res ? std::move(*res) : Failed(res.error()));
      } catch (...) {
        done.Fail(std::current_exception());
      }
    });
  };
  restinio::Handler sync = [app](restinio::RequestHandle req,
                                 ClaimHandle& claim) {
    HookedTx tx(*app->store, app->path, app->before_begin);
    auto res = restinio::RunInTransaction(tx, claim, [&](HookedTx& t) {
      return app->Insert(t.db(), req->body());
    });
    return res ? std::move(*res) : Failed(res.error());
  };
  restinio::Handler plain = [](restinio::RequestHandle req) {
    return App::Created(req->body());
  };
  const auto post = ::restinio::http_method_post();
  ValueOrThrow(idem_->Protect(post, "/tx", tx));
  ValueOrThrow(idem_->Protect(post, "/sync", sync));
  ValueOrThrow(idem_->Protect(post, "/plain", plain));
  ValueOrThrow(idem_->Protect(post, "/opt", tx, OptionalKey(options)));
  ::restinio::server_settings_t<Traits> settings;
  settings.port(0)
      .address("127.0.0.1")
      .acceptor_post_bind_hook([this](net::ip::tcp::acceptor& a) {
        restinio_port_ = a.local_endpoint().port();
      })
      .handle_request_timeout(std::chrono::seconds(120))
      .request_handler(idem_->ChainHandler());
  server_ = std::make_unique<::restinio::http_server_t<Traits>>(
      ::restinio::external_io_context(ioc_), std::move(settings));
  server_->open_sync();
  work_.emplace(ioc_.get_executor());
  io_ = std::thread([this] { ioc_.run(); });
}
#endif

TxServer::~TxServer() {
#if IDEM_DEMO_WITH_RESTINIO
  if (server_) {
    net::post(ioc_, [this] {
      server_->close_sync();
      work_.reset();
      ioc_.stop();
    });
    io_.join();
    idem_->JoinStoreCalls();
    ioc_.shutdown();
    server_.reset();
  }
#endif
}

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
