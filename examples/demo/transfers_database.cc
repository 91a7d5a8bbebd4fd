// The demo's transfers on SQLite and PostgreSQL (transfers_database.h): what
// both share is SqlDatabase (the table, the transaction, the crash points,
// the read connections); each store's class only speaks its client library.

#include "transfers_database.h"

#include <atomic>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "idem/beast/transaction.h"
#include "idem/sql_transaction.h"
#include "idem/store/local_cache.h"
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

// A client library's connection, closed with the library's own call.
template <typename T, auto Close>
struct Closer {
  void operator()(T* p) const { Close(p); }
};
template <typename T, auto Close>
using Connection = std::unique_ptr<T, Closer<T, Close>>;

// Connections of one kind, opened on first need and reused; as many as
// threads use them at once (the handler pool's size).
template <typename Conn>
class Connections {
 public:
  using Opener = std::function<Result<Conn>()>;
  explicit Connections(Opener open) : open_(std::move(open)) {}

  class Lease {
   public:
    Lease(Connections& owner, Conn conn)
        : owner_(owner), conn_(std::move(conn)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (!conn_) return;
      std::lock_guard lock(owner_.mu_);
      owner_.idle_.push_back(std::move(conn_));
    }
    auto* get() const { return conn_.get(); }
    // A connection that failed is not reused.
    void Discard() { conn_.reset(); }

   private:
    Connections& owner_;
    Conn conn_;
  };

  Result<Lease> Acquire() {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        Conn conn = std::move(idle_.back());
        idle_.pop_back();
        return Lease(*this, std::move(conn));
      }
    }
    IDEM_ASSIGN_OR_RETURN(Conn conn, open_());
    return Lease(*this, std::move(conn));
  }

 private:
  const Opener open_;
  std::mutex mu_;
  std::vector<Conn> idle_;  // Under mu_.
};

// A failed insert, thrown so that RunInTransaction rolls back.
struct InsertFailed {
  Error error;
};

// What both SQL stores' transfers share. The table is created once
// (Prepare; until that succeeds every Insert and Count tries again, so a
// PostgreSQL store opened with connect=lazy while its server is down starts
// the demo and gets its table when the server answers). Each transfer is
// one transaction of the store's own (Tx, on the store's connection: both
// modes differ only in where the record is completed, inside it with
// --exactly-once or afterwards by the adapter's Finish), with the crash
// points. Counts read on connections of their own (Conn), which never
// write. `Derived` speaks its client library: CreateTable(Tx&),
// InsertRow(Tx&, id, body), OpenReader(), CountRows(reader) and
// ReaderBroken(reader) (whether a failed count left it unusable).
template <typename Derived, typename TypedStore, typename Tx, typename Conn>
class SqlDatabase : public Transfers::Database {
 public:
  explicit SqlDatabase(TypedStore& store)
      : store_(store), readers_([this] { return self().OpenReader(); }) {}

  Status Prepare() {
    if (prepared_.load(std::memory_order_acquire)) return {};
    Tx tx(store_);
    IDEM_RETURN_IF_ERROR(tx.Begin());
    IDEM_RETURN_IF_ERROR(self().CreateTable(tx));
    IDEM_RETURN_IF_ERROR(tx.Commit());
    prepared_.store(true, std::memory_order_release);
    return {};
  }

  Result<beast::Response> Insert(ClaimHandle& claim, const std::string& id,
                                 std::string_view body,
                                 const beast::Response& created,
                                 Crash crash) final {
    IDEM_RETURN_IF_ERROR(Prepare());
    Tx tx(store_);
    Result<beast::Response> done = created;
    try {
      // The adapter's own helper: the record completed with exactly what
      // the adapter would store for `created`.
      done = beast::RunInTransaction(tx, claim, [&](Tx& t) {
        if (auto ok = self().InsertRow(t, id, body); !ok) {
          throw InsertFailed{ok.error()};
        }
        // The row is written and the record (with --exactly-once)
        // completed, neither committed.
        if (crash == Crash::kBeforeCommit) std::abort();
        return created;
      });
    } catch (const InsertFailed& failed) {
      return tl::unexpected(failed.error);
    }
    if (done && crash == Crash::kAfterCommit) std::abort();
    return done;
  }

  Result<std::int64_t> Count() final {
    IDEM_RETURN_IF_ERROR(Prepare());
    IDEM_ASSIGN_OR_RETURN(auto lease, readers_.Acquire());
    auto n = self().CountRows(lease.get());
    if (!n && self().ReaderBroken(lease.get())) lease.Discard();
    return n;
  }

 protected:
  TypedStore& store_;

 private:
  Derived& self() { return static_cast<Derived&>(*this); }

  Connections<Conn> readers_;
  std::atomic<bool> prepared_{false};
};

#ifdef IDEM_HAVE_SQLITE
using SqliteConn = Connection<sqlite3, sqlite3_close_v2>;

// The transaction runs on the store's writer (SqliteTransaction(store)).
class SqliteDatabase final : public SqlDatabase<SqliteDatabase, SqliteStore,
                                                SqliteTransaction, SqliteConn> {
 public:
  using SqlDatabase::SqlDatabase;

  Status CreateTable(SqliteTransaction& tx) {
    const char* sql =
        "CREATE TABLE IF NOT EXISTS transfers (id TEXT PRIMARY KEY, "
        "body TEXT NOT NULL)";
    if (sqlite3_exec(tx.db(), sql, nullptr, nullptr, nullptr) == SQLITE_OK) {
      return {};
    }
    return Failed(tx.db(), sql);
  }

  Status InsertRow(SqliteTransaction& tx, const std::string& id,
                   std::string_view body) {
    // Prepared and finalized inside the transaction: the connection is the
    // store's, and must be left without statements of ours.
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(
        tx.db(), "INSERT INTO transfers (id, body) VALUES (?1, ?2)", -1, &stmt,
        nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(stmt, 1, id.data(), static_cast<int>(id.size()),
                        SQLITE_STATIC);
      sqlite3_bind_text(stmt, 2, body.data(), static_cast<int>(body.size()),
                        SQLITE_STATIC);
      rc = sqlite3_step(stmt);
    }
    sqlite3_finalize(stmt);
    if (rc == SQLITE_DONE) return {};
    return Failed(tx.db(), "insert");
  }

  Result<SqliteConn> OpenReader() {
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(store_.path().c_str(), &db,
                                   SQLITE_OPEN_READONLY, nullptr);
    SqliteConn conn(db);
    if (rc != SQLITE_OK) return tl::unexpected(Failed(db, "open").error());
    sqlite3_busy_timeout(db, 5000);
    return conn;
  }

  Result<std::int64_t> CountRows(sqlite3* db) {
    sqlite3_stmt* stmt = nullptr;
    std::int64_t n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM transfers", -1, &stmt,
                           nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      n = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
    if (n < 0) return tl::unexpected(Failed(db, "count").error());
    return n;
  }

  bool ReaderBroken(sqlite3*) { return true; }

 private:
  Status Failed(sqlite3* db, std::string_view op) {
    return MakeError(ErrorCode::kUnavailable,
                     "transfers '" + store_.path() + "': " + std::string(op) +
                         ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
  }
};
#endif  // IDEM_HAVE_SQLITE

#ifdef IDEM_HAVE_POSTGRES
using PgConn = Connection<PGconn, PQfinish>;

// The transaction runs on a connection the store lends from its pool
// (PostgresTransaction(store)); with --exactly-once the record is completed
// with the statement the store prepared on that connection.
class PostgresDatabase final
    : public SqlDatabase<PostgresDatabase, PostgresStore, PostgresTransaction,
                         PgConn> {
 public:
  PostgresDatabase(PostgresStore& store, std::string conninfo)
      : SqlDatabase(store), conninfo_(std::move(conninfo)) {}

  Status CreateTable(PostgresTransaction& tx) {
    return Exec(tx.conn(),
                "CREATE TABLE IF NOT EXISTS transfers (id text PRIMARY KEY, "
                "body text NOT NULL)",
                {}, PGRES_COMMAND_OK)
        .map([](auto&&) {});
  }

  Status InsertRow(PostgresTransaction& tx, const std::string& id,
                   std::string_view body) {
    // Unprepared: the connection is the store's, and a PREPARE would change
    // its session.
    const std::string body_text(body);
    return Exec(tx.conn(), "INSERT INTO transfers (id, body) VALUES ($1, $2)",
                {id.c_str(), body_text.c_str()}, PGRES_COMMAND_OK)
        .map([](auto&&) {});
  }

  Result<PgConn> OpenReader() {
    PgConn conn(PQconnectdb(conninfo_.c_str()));
    if (PQstatus(conn.get()) != CONNECTION_OK) {
      return MakeError(
          ErrorCode::kUnavailable,
          std::string("transfers: connect: ") + PQerrorMessage(conn.get()));
    }
    return conn;
  }

  Result<std::int64_t> CountRows(PGconn* conn) {
    IDEM_ASSIGN_OR_RETURN(auto r, Exec(conn, "SELECT count(*) FROM transfers",
                                       {}, PGRES_TUPLES_OK));
    return std::strtoll(PQgetvalue(r.get(), 0, 0), nullptr, 10);
  }

  bool ReaderBroken(PGconn* conn) { return PQstatus(conn) != CONNECTION_OK; }

 private:
  struct Clear {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  using PgResult = std::unique_ptr<PGresult, Clear>;

  static Result<PgResult> Exec(PGconn* conn, const char* sql,
                               std::vector<const char*> params,
                               ExecStatusType want) {
    PgResult r(PQexecParams(conn, sql, static_cast<int>(params.size()), nullptr,
                            params.data(), nullptr, nullptr, 0));
    if (r && PQresultStatus(r.get()) == want) return r;
    return MakeError(ErrorCode::kUnavailable,
                     std::string("transfers: ") + PQerrorMessage(conn));
  }

  const std::string conninfo_;
};
#endif  // IDEM_HAVE_POSTGRES

}  // namespace

Result<std::unique_ptr<Store>> OpenTypedSqlStore(std::string_view store_uri,
                                                 Duration& sweep,
                                                 LocalCacheOptions* cache) {
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
    // The local cache (idem/store/local_cache.h) goes in front of the
    // Guard's store (Transfers::OpenSqlStore); an instance of the store's
    // own completes records in the transfer's transaction, uncached.
    LocalCacheOptions uncached;
    IDEM_RETURN_IF_ERROR(
        ReadLocalCacheOptions(uri, cache != nullptr ? *cache : uncached));
    return PostgresStore::OpenFromUri(uri, {});
  }
#endif
  return std::unique_ptr<Store>();
}

Result<std::unique_ptr<Transfers::Database>> OpenTransfersDatabase(
    Store* store, [[maybe_unused]] std::string_view store_uri) {
#ifdef IDEM_HAVE_SQLITE
  if (auto* sqlite = dynamic_cast<SqliteStore*>(store)) {
    auto db = std::make_unique<SqliteDatabase>(*sqlite);
    IDEM_RETURN_IF_ERROR(db->Prepare());
    return std::unique_ptr<Transfers::Database>(std::move(db));
  }
#endif
#ifdef IDEM_HAVE_POSTGRES
  if (auto* postgres = dynamic_cast<PostgresStore*>(store)) {
    // libpq takes the store's URI without idem's own parameters.
    const std::string_view conninfo = store_uri.substr(0, store_uri.find('?'));
    auto db =
        std::make_unique<PostgresDatabase>(*postgres, std::string(conninfo));
    // A server that is not there yet (connect=lazy) is no start-up error:
    // the first transfer creates the table.
    if (Status prepared = db->Prepare();
        !prepared && prepared.error().code() != ErrorCode::kUnavailable) {
      return tl::unexpected(prepared.error());
    }
    return std::unique_ptr<Transfers::Database>(std::move(db));
  }
#endif
  return std::unique_ptr<Transfers::Database>();
}

}  // namespace idem::demo
