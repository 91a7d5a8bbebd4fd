// Transfers: POST /transfers and GET /transfers/count of idem-demo
// (SEMANTICS.md, "The demo server"): a business row written in the store's
// own database, and, with --exactly-once, the idempotency record completed
// in the same transaction (idem/sql_transaction.h).
//
//   POST /transfers        protected, key required: inserts a row into
//                          `transfers` and answers 201 {"id","instance"}.
//                          X-Demo-Crash: before_commit | after_commit aborts
//                          the process at that point.
//   GET  /transfers/count  {"count":N}
//
// Both answer 501 on a store without SQL (memory, RocksDB, Redis). The
// handler is blocking SQL, so it runs on a thread pool of its own (never on
// an I/O thread), under Guard::Run.
//
// Thread-safety: Handle may run concurrently on any number of threads.

#ifndef IDEM_DEMO_TRANSFERS_H_
#define IDEM_DEMO_TRANSFERS_H_

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "idem/beast/handler.h"
#include "idem/beast/idempotent_handler.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "idem/store.h"

namespace idem::demo {

// Whether `store_uri` names a store with SQL transactions to join (sqlite:,
// postgresql:, postgres:).
bool IsSqlStoreUri(std::string_view store_uri);

class Transfers {
 public:
  struct Options {
    std::string instance = "demo";
    // Complete the record inside the business transaction (--exactly-once).
    bool exactly_once = false;
    // Threads running the blocking handler. Default: 4.
    std::size_t threads = 4;
    // Resolves the request's scope, as the IdempotentHandler does.
    beast::ScopeResolver scope;
    // Called once per POST /transfers handler run (DemoApp's handler_runs).
    std::function<void()> count_run;
    LogSink log;
  };

  // For the store `store_uri` names (the Guard's): a SQLite or PostgreSQL
  // one gets a store instance of its own on the same file or table, its own
  // connections to that database (`store_uri` without its query is libpq's
  // connection URI) and a `transfers` table; any other store answers 501,
  // and is kInvalidArgument with options.exactly_once. Errors: the store's,
  // the connection's or the table's.
  // `sql_store`: the Guard's own SQLite or PostgreSQL store (OpenSqlStore's
  // `typed`), used instead of an instance of its own when given, so that a
  // PostgreSQL completion finds the claim in that store's memo and needs no
  // SELECT.
  static Result<std::unique_ptr<Transfers>> Create(std::shared_ptr<Guard> guard,
                                                   std::string_view store_uri,
                                                   Options options,
                                                   Store* sql_store = nullptr);

  // The SQL store `store_uri` names, opened as OpenStore opens it (with its
  // sweeper: the URI's sweep_interval_s, else options.sweep_interval), and
  // the typed store inside it, alive as long as `store`. Errors: as
  // OpenStore's; kInvalidArgument for a scheme that is not a SQL store's.
  struct SqlStore {
    std::shared_ptr<Store> store;
    Store* typed = nullptr;
  };
  static Result<SqlStore> OpenSqlStore(std::string_view store_uri,
                                       const StoreOptions& options);
  ~Transfers();

  // Whether the request is one of this class's paths.
  static bool Matches(const beast::Request& request);

  boost::asio::awaitable<beast::Response> Handle(beast::Request request);

  class Database;  // The SQL side, per store (transfers.cc).

 private:
  Transfers(std::shared_ptr<Guard> guard, Options options,
            std::unique_ptr<Store> store, std::unique_ptr<Database> db);
  beast::Response Post(const beast::Request& request);
  beast::Response Count(const beast::Request& request);

  const std::shared_ptr<Guard> guard_;
  const Options options_;
  // The SQL store's own instance on the Guard's file or table (its typed
  // CompleteInTransaction); declared before db_, which uses it.
  const std::unique_ptr<Store> store_;
  const std::unique_ptr<Database> db_;  // Null: no SQL store, 501.
  struct Pool;
  std::unique_ptr<Pool> pool_;
  beast::Handler blocking_;
};

}  // namespace idem::demo

#endif  // IDEM_DEMO_TRANSFERS_H_
