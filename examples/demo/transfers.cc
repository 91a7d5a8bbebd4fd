#include "transfers.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <random>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <nlohmann/json.hpp>

#include "idem/beast/convert.h"
#include "idem/beast/transaction.h"
#include "idem/problem.h"
#include "idem/sql_transaction.h"
#include "idem/store_uri.h"
#include "idem/sweeper.h"
#ifdef IDEM_HAVE_SQLITE
#include <sqlite3.h>

#include "idem/sqlite_transaction.h"
#endif
#ifdef IDEM_HAVE_POSTGRES
#include <libpq-fe.h>

#include "idem/postgres_transaction.h"
#endif

namespace idem::demo {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;

constexpr std::string_view kTransfers = "/transfers";
constexpr std::string_view kCount = "/transfers/count";

enum class Crash { kNone, kBeforeCommit, kAfterCommit };

std::string_view PathOf(const beast::Request& request) {
  const std::string_view target = beast::ToStd(request.target());
  return target.substr(0, target.find('?'));
}

idem::Response ProblemOf(int status, std::string_view code,
                         std::string detail) {
  Problem p;
  p.status = status;
  p.code = code;
  p.detail = std::move(detail);
  p.instance = kTransfers;
  return MakeProblemResponse(p);
}

// Connections of one kind, opened on first need and reused; as many as
// threads use them at once (the handler pool's size).
template <typename Conn>
class Connections {
 public:
  using Opener = std::function<Result<std::unique_ptr<Conn>>()>;
  explicit Connections(Opener open) : open_(std::move(open)) {}

  class Lease {
   public:
    Lease(Connections& owner, std::unique_ptr<Conn> conn)
        : owner_(owner), conn_(std::move(conn)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (!conn_) return;
      std::lock_guard lock(owner_.mu_);
      owner_.idle_.push_back(std::move(conn_));
    }
    Conn& operator*() const { return *conn_; }
    // A connection that failed is not reused.
    void Discard() { conn_.reset(); }

   private:
    Connections& owner_;
    std::unique_ptr<Conn> conn_;
  };

  Result<Lease> Acquire() {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<Conn> conn = std::move(idle_.back());
        idle_.pop_back();
        return Lease(*this, std::move(conn));
      }
    }
    IDEM_ASSIGN_OR_RETURN(std::unique_ptr<Conn> conn, open_());
    return Lease(*this, std::move(conn));
  }

 private:
  const Opener open_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_;  // Under mu_.
};

}  // namespace

// The SQL side: one transaction per transfer, on the store's database.
class Transfers::Database {
 public:
  virtual ~Database() = default;
  // Inserts transfer `id` and commits, completing `claim` in the same
  // transaction when it is active (exactly once); aborts at `crash`.
  virtual Result<beast::Response> Insert(ClaimHandle& claim,
                                         const std::string& id,
                                         std::string_view body,
                                         const beast::Response& created,
                                         Crash crash) = 0;
  virtual Result<std::int64_t> Count() = 0;
};

namespace {

// A failed insert, thrown so that RunInTransaction rolls back.
struct InsertFailed {
  Error error;
};

// The steps both SQL stores share: the transaction, the crash points.
template <typename Tx, typename InsertRow>
Result<beast::Response> InsertInTransaction(Tx& tx, ClaimHandle& claim,
                                            const beast::Response& created,
                                            Crash crash, InsertRow&& insert) {
  Result<beast::Response> done = created;
  try {
    // The adapter's own helper: the record completed with exactly what the
    // adapter would store for `created`.
    done = beast::RunInTransaction(tx, claim, [&](Tx& t) {
      if (auto ok = insert(t); !ok) throw InsertFailed{ok.error()};
      // The row is written and the record (with --exactly-once) completed,
      // neither committed.
      if (crash == Crash::kBeforeCommit) std::abort();
      return created;
    });
  } catch (const InsertFailed& failed) {
    return tl::unexpected(failed.error);
  }
  if (done && crash == Crash::kAfterCommit) std::abort();
  return done;
}

#ifdef IDEM_HAVE_SQLITE
struct SqliteConn {
  ~SqliteConn() { sqlite3_close_v2(db); }
  sqlite3* db = nullptr;
};

// The transfer's transaction runs on the store's writer
// (SqliteTransaction(store)) in both modes, so that they differ only in
// where the record is completed: inside it (--exactly-once), or afterwards
// by the adapter's Finish, a write of its own on the same writer. Counts
// read on connections of their own, which never write.
class SqliteDatabase final : public Transfers::Database {
 public:
  explicit SqliteDatabase(SqliteStore& store)
      : store_(store), readers_([this] { return Open(); }) {}

  Status Prepare() {
    SqliteTransaction tx(store_);
    IDEM_RETURN_IF_ERROR(tx.Begin());
    IDEM_RETURN_IF_ERROR(
        Exec(tx.db(),
             "CREATE TABLE IF NOT EXISTS transfers (id TEXT PRIMARY KEY, "
             "body TEXT NOT NULL)"));
    return tx.Commit();
  }

  Result<beast::Response> Insert(ClaimHandle& claim, const std::string& id,
                                 std::string_view body,
                                 const beast::Response& created,
                                 Crash crash) override {
    SqliteTransaction tx(store_);
    return InsertInTransaction(
        tx, claim, created, crash, [&](SqliteTransaction& t) -> Status {
          // Prepared and finalized inside the transaction: the connection is
          // the store's, and must be left without statements of ours.
          sqlite3_stmt* stmt = nullptr;
          int rc = sqlite3_prepare_v2(
              t.db(), "INSERT INTO transfers (id, body) VALUES (?1, ?2)", -1,
              &stmt, nullptr);
          if (rc == SQLITE_OK) {
            sqlite3_bind_text(stmt, 1, id.data(), static_cast<int>(id.size()),
                              SQLITE_STATIC);
            sqlite3_bind_text(stmt, 2, body.data(),
                              static_cast<int>(body.size()), SQLITE_STATIC);
            rc = sqlite3_step(stmt);
          }
          sqlite3_finalize(stmt);
          if (rc == SQLITE_DONE) return {};
          return Failed(t.db(), "insert");
        });
  }

  Result<std::int64_t> Count() override {
    IDEM_ASSIGN_OR_RETURN(auto lease, readers_.Acquire());
    sqlite3_stmt* stmt = nullptr;
    std::int64_t n = -1;
    if (sqlite3_prepare_v2((*lease).db, "SELECT count(*) FROM transfers", -1,
                           &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      n = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
    if (n < 0) {
      Status failed = Failed((*lease).db, "count");
      lease.Discard();
      return tl::unexpected(failed.error());
    }
    return n;
  }

 private:
  Result<std::unique_ptr<SqliteConn>> Open() {
    auto conn = std::make_unique<SqliteConn>();
    const int rc = sqlite3_open_v2(store_.path().c_str(), &conn->db,
                                   SQLITE_OPEN_READONLY, nullptr);
    if (rc != SQLITE_OK)
      return tl::unexpected(Failed(conn->db, "open").error());
    sqlite3_busy_timeout(conn->db, 5000);
    return conn;
  }

  Status Exec(sqlite3* db, const char* sql) {
    if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK) {
      return {};
    }
    return Failed(db, sql);
  }

  Status Failed(sqlite3* db, std::string_view op) {
    return MakeError(ErrorCode::kUnavailable,
                     "transfers '" + store_.path() + "': " + std::string(op) +
                         ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
  }

  SqliteStore& store_;
  Connections<SqliteConn> readers_;
};

#endif  // IDEM_HAVE_SQLITE

#ifdef IDEM_HAVE_POSTGRES
struct PgConn {
  ~PgConn() { PQfinish(conn); }
  PGconn* conn = nullptr;
};

// The transfer's transaction runs on a connection the store lends from its
// pool (PostgresTransaction(store)) in both modes, so that they differ only
// in where the record is completed: inside it with the statement the store
// prepared on that connection (--exactly-once), or afterwards by the
// adapter's Finish, on a pool connection again. Counts read on connections
// of their own.
class PostgresDatabase final : public Transfers::Database {
 public:
  PostgresDatabase(PostgresStore& store, std::string conninfo)
      : store_(store),
        conninfo_(std::move(conninfo)),
        counters_([this] { return Open(); }) {}

  // Creates the table once; until that succeeds every Insert and Count
  // tries again, so a store opened with connect=lazy while its server is
  // down starts the demo and gets its table when the server answers.
  Status Prepare() {
    if (prepared_.load(std::memory_order_acquire)) return {};
    PostgresTransaction tx(store_);
    IDEM_RETURN_IF_ERROR(tx.Begin());
    IDEM_RETURN_IF_ERROR(
        Exec(tx.conn(),
             "CREATE TABLE IF NOT EXISTS transfers (id text PRIMARY KEY, "
             "body text NOT NULL)",
             {}, PGRES_COMMAND_OK));
    IDEM_RETURN_IF_ERROR(tx.Commit());
    prepared_.store(true, std::memory_order_release);
    return {};
  }

  Result<beast::Response> Insert(ClaimHandle& claim, const std::string& id,
                                 std::string_view body,
                                 const beast::Response& created,
                                 Crash crash) override {
    IDEM_RETURN_IF_ERROR(Prepare());
    PostgresTransaction tx(store_);
    const std::string body_text(body);
    return InsertInTransaction(
        tx, claim, created, crash, [&](PostgresTransaction& t) -> Status {
          // Unprepared: the connection is the store's, and a PREPARE would
          // change its session.
          return Exec(t.conn(),
                      "INSERT INTO transfers (id, body) VALUES ($1, $2)",
                      {id.c_str(), body_text.c_str()}, PGRES_COMMAND_OK)
              .map([](auto&&) {});
        });
  }

  Result<std::int64_t> Count() override {
    IDEM_RETURN_IF_ERROR(Prepare());
    IDEM_ASSIGN_OR_RETURN(auto lease, counters_.Acquire());
    auto r = Exec((*lease).conn, "SELECT count(*) FROM transfers", {},
                  PGRES_TUPLES_OK);
    if (!r) {
      if (PQstatus((*lease).conn) != CONNECTION_OK) lease.Discard();
      return tl::unexpected(r.error());
    }
    return std::strtoll(PQgetvalue(r->get(), 0, 0), nullptr, 10);
  }

 private:
  struct Clear {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  using PgResult = std::unique_ptr<PGresult, Clear>;

  Result<std::unique_ptr<PgConn>> Open() {
    auto conn = std::make_unique<PgConn>();
    conn->conn = PQconnectdb(conninfo_.c_str());
    if (PQstatus(conn->conn) != CONNECTION_OK) {
      return MakeError(
          ErrorCode::kUnavailable,
          std::string("transfers: connect: ") + PQerrorMessage(conn->conn));
    }
    return conn;
  }

  Result<PgResult> Exec(PGconn* conn, const char* sql,
                        std::vector<const char*> params, ExecStatusType want) {
    PgResult r(PQexecParams(conn, sql, static_cast<int>(params.size()), nullptr,
                            params.data(), nullptr, nullptr, 0));
    if (r && PQresultStatus(r.get()) == want) return r;
    return MakeError(ErrorCode::kUnavailable,
                     std::string("transfers: ") + PQerrorMessage(conn));
  }

  PostgresStore& store_;
  const std::string conninfo_;
  Connections<PgConn> counters_;  // For Count only.
  std::atomic<bool> prepared_{false};
};

#endif  // IDEM_HAVE_POSTGRES

// The typed store `store_uri` names, and its sweep interval (the URI's
// sweep_interval_s, else `sweep`), or nullptr for another scheme.
Result<std::unique_ptr<Store>> OpenTyped(std::string_view store_uri,
                                         Duration& sweep) {
  IDEM_ASSIGN_OR_RETURN(StoreUri uri, StoreUri::Parse(store_uri));
  // OpenStore's own parameter, which the typed calls refuse.
  IDEM_RETURN_IF_ERROR(uri.ReadDuration(
      "sweep_interval_s", sweep, std::chrono::seconds(0),
      std::chrono::duration_cast<std::chrono::seconds>(kMaxSweepInterval)));
#ifdef IDEM_HAVE_SQLITE
  if (uri.scheme() == "sqlite") return SqliteStore::OpenFromUri(uri, {});
#endif
#ifdef IDEM_HAVE_POSTGRES
  if (uri.scheme() == "postgresql" || uri.scheme() == "postgres") {
    return PostgresStore::OpenFromUri(uri, {});
  }
#endif
  return std::unique_ptr<Store>();
}

std::uint64_t RandomNonce() {
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

}  // namespace

struct Transfers::Pool {
  explicit Pool(std::size_t threads) : pool(threads) {}
  asio::thread_pool pool;
  const std::uint64_t nonce = RandomNonce();
  std::atomic<std::uint64_t> next{1};
};

bool IsSqlStoreUri(std::string_view store_uri) {
  return store_uri.starts_with("sqlite:") ||
         store_uri.starts_with("postgresql:") ||
         store_uri.starts_with("postgres:");
}

Result<Transfers::SqlStore> Transfers::OpenSqlStore(
    std::string_view store_uri, const StoreOptions& options) {
  Duration sweep = options.sweep_interval;
  IDEM_ASSIGN_OR_RETURN(std::unique_ptr<Store> typed,
                        OpenTyped(store_uri, sweep));
  if (!typed) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "not a SQL store: " +
                         std::string(store_uri.substr(0, store_uri.find(':'))));
  }
  SqlStore opened;
  opened.typed = typed.get();
  SweeperOptions sweeper;
  sweeper.interval = sweep;
  sweeper.clock = options.clock;
  sweeper.log = options.log;
  IDEM_ASSIGN_OR_RETURN(auto swept,
                        WithSweeper(std::move(typed), std::move(sweeper)));
  opened.store = std::move(swept);
  return opened;
}

Result<std::unique_ptr<Transfers>> Transfers::Create(
    std::shared_ptr<Guard> guard, std::string_view store_uri, Options options,
    Store* sql_store) {
  std::unique_ptr<Store> own;
  if (sql_store == nullptr && IsSqlStoreUri(store_uri)) {
    // A store instance of its own on the same file or table.
    Duration sweep{};
    IDEM_ASSIGN_OR_RETURN(own, OpenTyped(store_uri, sweep));
  }
  Store* store = sql_store != nullptr ? sql_store : own.get();
  std::unique_ptr<Database> db;
#ifdef IDEM_HAVE_SQLITE
  if (auto* sqlite = dynamic_cast<SqliteStore*>(store)) {
    auto sqlite_db = std::make_unique<SqliteDatabase>(*sqlite);
    IDEM_RETURN_IF_ERROR(sqlite_db->Prepare());
    db = std::move(sqlite_db);
  }
#endif
#ifdef IDEM_HAVE_POSTGRES
  if (auto* postgres = dynamic_cast<PostgresStore*>(store)) {
    // libpq takes the store's URI without idem's own parameters.
    const std::string_view conninfo = store_uri.substr(0, store_uri.find('?'));
    auto pg_db =
        std::make_unique<PostgresDatabase>(*postgres, std::string(conninfo));
    // A server that is not there yet (connect=lazy) is no start-up error:
    // the first transfer creates the table.
    if (Status prepared = pg_db->Prepare();
        !prepared && prepared.error().code() != ErrorCode::kUnavailable) {
      return tl::unexpected(prepared.error());
    }
    db = std::move(pg_db);
  }
#endif
  if (options.threads == 0) {
    const std::size_t served = store ? store->Info().max_concurrent_calls : 0;
    options.threads = served != 0 ? served : 4;
  }
  if (!db && options.exactly_once) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--exactly-once needs a SQL store (sqlite: or "
                     "postgresql:), not " +
                         guard->store().Info().name);
  }
  return std::unique_ptr<Transfers>(new Transfers(
      std::move(guard), std::move(options), std::move(own), std::move(db)));
}

Transfers::Transfers(std::shared_ptr<Guard> guard, Options options,
                     std::unique_ptr<Store> store, std::unique_ptr<Database> db)
    : guard_(std::move(guard)),
      options_(std::move(options)),
      store_(std::move(store)),
      db_(std::move(db)),
      pool_(std::make_unique<Pool>(options_.threads)) {
  // The claim-taking completion form of handler.h: the blocking SQL runs on
  // the pool and the request resumes on its connection's executor. The
  // claim stays valid until `done` is called.
  blocking_ = [this](beast::Request request, ClaimHandle& claim,
                     beast::Responder done) {
    asio::post(pool_->pool, [this, request = std::move(request), &claim,
                             done = std::move(done)]() mutable {
      try {
        done(Serve(request, claim));
      } catch (...) {
        done.Fail(std::current_exception());
      }
    });
  };
}

Transfers::~Transfers() { pool_->pool.join(); }

bool Transfers::Matches(const beast::Request& request) {
  const std::string_view path = PathOf(request);
  return path == kTransfers || path == kCount;
}

asio::thread_pool& Transfers::pool() { return pool_->pool; }

asio::awaitable<beast::Response> Transfers::Handle(beast::Request request) {
  ClaimHandle unprotected;
  co_return co_await Handle(std::move(request), unprotected);
}

asio::awaitable<beast::Response> Transfers::Handle(beast::Request request,
                                                   ClaimHandle& claim) {
  const std::string_view path = PathOf(request);
  const http::verb want = path == kCount ? http::verb::get : http::verb::post;
  const unsigned version = request.version();
  const bool keep_alive = request.keep_alive();
  if (!db_) {
    co_return beast::ToBeast(
        ProblemOf(501, "demo_no_sql_store",
                  "This store has no SQL transaction to join: /transfers needs "
                  "a sqlite: or postgresql: store."),
        version, keep_alive);
  }
  if (request.method() != want) {
    beast::Response res =
        beast::ToBeast(ProblemOf(405, "method_not_allowed",
                                 "This path does not accept this method."),
                       version, keep_alive);
    res.set(http::field::allow, want == http::verb::get ? "GET" : "POST");
    co_return res;
  }
  co_return co_await blocking_(std::move(request), claim);
}

beast::Response Transfers::Serve(const beast::Request& request,
                                 ClaimHandle& claim) {
  return PathOf(request) == kCount ? Count(request) : Post(request, claim);
}

beast::Response Transfers::Count(const beast::Request& request) {
  auto n = db_->Count();
  idem::Response res;
  if (n) {
    nlohmann::ordered_json j;
    j["count"] = *n;
    res.status = 200;
    res.headers.emplace_back("Content-Type", "application/json");
    res.body = j.dump();
  } else {
    res = ProblemOf(500, "demo_transfers_failed", n.error().message());
  }
  return beast::ToBeast(res, request.version(), request.keep_alive());
}

beast::Response Transfers::Post(const beast::Request& request,
                                ClaimHandle& claim) {
  Crash crash = Crash::kNone;
  if (auto it = request.find("X-Demo-Crash"); it != request.end()) {
    const std::string_view value = beast::ToStd(it->value());
    if (value == "before_commit") crash = Crash::kBeforeCommit;
    if (value == "after_commit") crash = Crash::kAfterCommit;
  }
  if (options_.count_run) options_.count_run();
  char id[48];
  std::snprintf(id, sizeof id, "t%016llx-%llu",
                static_cast<unsigned long long>(pool_->nonce),
                static_cast<unsigned long long>(pool_->next.fetch_add(1)));
  nlohmann::ordered_json j;
  j["id"] = id;
  j["instance"] = options_.instance;
  idem::Response created;
  created.status = 201;
  created.headers = {{"Content-Type", "application/json"},
                     {"Location", std::string("/transfers/") + id},
                     {"X-Demo-Instance", options_.instance}};
  created.body = j.dump();
  const unsigned version = request.version();
  const bool keep_alive = request.keep_alive();
  // Without --exactly-once the record is completed afterwards, by the
  // adapter's Finish, as for /orders: the transaction holds the row only.
  ClaimHandle unprotected;
  auto done = db_->Insert(options_.exactly_once ? claim : unprotected, id,
                          request.body(),
                          beast::ToBeast(created, version, keep_alive), crash);
  if (done) return std::move(*done);
  if (options_.log) options_.log(LogLevel::kError, done.error().message());
  return beast::ToBeast(
      ProblemOf(500, "demo_transfers_failed", "The transfer was not written."),
      version, keep_alive);
}

}  // namespace idem::demo
