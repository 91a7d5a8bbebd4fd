// The server of tests/http/transaction_http_test.cc: an application whose
// handlers complete the idempotency record in their own SQLite transaction
// (the adapters' claim-taking handler forms and RunInTransaction), behind
// either adapter's IdempotentHandler on 127.0.0.1:0.
//
//   POST /tx     completion form with the claim: inserts a row and answers
//                201 in the transaction
//   POST /sync   the synchronous form with the claim, the same
//   POST /plain  the same answer without a transaction or claim: what the
//                adapter itself stores
//   POST /opt    as /tx, the key optional
//
// Thread-safety: App's hooks are set before the requests they are for.

#ifndef IDEM_TESTS_HTTP_TRANSACTION_TEST_SERVER_H_
#define IDEM_TESTS_HTTP_TRANSACTION_TEST_SERVER_H_

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
#include "idem/sqlite_store.h"
#include "idem/sqlite_transaction.h"
#include "idem/store/forwarding_store.h"
#include "idem/testing/status_matchers.h"
#include "support/hooked_transaction.h"
#include "support/sqlite_count.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"
#if IDEM_DEMO_WITH_RESTINIO
#include <restinio/all.hpp>

#include "idem/restinio/idempotent_handler.h"
#include "idem/restinio/transaction.h"
#endif

namespace idem::testing {

namespace net = boost::asio;

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
  long long Rows() { return SqliteCountRows(path, "transfers"); }
};

// One adapter's server around App on 127.0.0.1:0.
class TxServer {
 public:
  TxServer(demo::HttpFramework http, std::shared_ptr<Store> store,
           std::shared_ptr<Clock> clock, GuardOptions options, App* app);
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

}  // namespace idem::testing

#endif  // IDEM_TESTS_HTTP_TRANSACTION_TEST_SERVER_H_
