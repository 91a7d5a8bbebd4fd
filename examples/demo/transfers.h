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
// Both answer 501 on a store without SQL (memory, RocksDB, Redis). With a
// SQL store POST /transfers is a protected route of the server's idem
// adapter like /orders (both --http beast and restinio), with the guard's
// options: its handler is the adapters' claim-taking completion form
// (idem/asio/handler.h), blocking SQL on a thread pool of its own (never on
// an I/O thread), answering through its Responder; with --exactly-once it
// completes the record in its transaction (idem::beast::RunInTransaction).
// On SQLite the transaction runs on the store's writer in both modes
// (SqliteTransaction(store)), so the two differ only in where the record is
// completed: in the transaction, or by the adapter's Finish after it.
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
#include <boost/asio/thread_pool.hpp>

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
    // Threads running the blocking handler, each on a database connection of
    // its own. 0: the SQL store's Info().max_concurrent_calls (PostgreSQL:
    // its pool), else 4. With --exactly-once the record's completion runs
    // here too, not on the adapter's store-call pool: fewer threads than the
    // store serves would queue requests the server could take. Default: 0.
    std::size_t threads = 0;
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
  // Whether POST /transfers is to be protected: the store has SQL (else
  // every request is answered 501).
  bool protect() const { return db_ != nullptr; }

  // Either path, for the adapter's handler: 501 without SQL, 405 for the
  // wrong method, else Serve on the pool (its completion form). `claim`
  // (inactive when the request is not protected) must stay valid until the
  // awaitable completes.
  boost::asio::awaitable<beast::Response> Handle(beast::Request request,
                                                 ClaimHandle& claim);
  // Unprotected (an inactive claim).
  boost::asio::awaitable<beast::Response> Handle(beast::Request request);

  // The blocking part, for a pool thread: GET /transfers/count, or POST
  // /transfers under `claim`. Throws nothing; a failed insert is a 500
  // (not stored: the adapter releases the key).
  beast::Response Serve(const beast::Request& request, ClaimHandle& claim);
  // The pool Serve runs on.
  boost::asio::thread_pool& pool();

  class Database;  // The SQL side, per store (transfers_database.h).

 private:
  Transfers(std::shared_ptr<Guard> guard, Options options,
            std::unique_ptr<Store> store, std::unique_ptr<Database> db);
  beast::Response Post(const beast::Request& request, ClaimHandle& claim);
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
