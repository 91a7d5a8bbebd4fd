// The SQLite store; see sqlite_store.h for its contract and schema.
//
// Writes run on the one writer connection, reads on a pooled connection
// (multi-thread mode: a connection is used by one thread at a time); each
// connection caches its prepared statements. A statement's bindings point at
// buffers of the calling frame (SQLITE_STATIC, no copies of large records),
// so every statement is reset before those buffers go out of scope:
// StatementScope does that. Writes queued behind the writer run on the
// thread that finds it idle, while their callers wait: their frames outlive
// the transaction.

#include "idem/sqlite_store.h"

#include "idem/catch_exceptions.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "idem/record_codec.h"
#include "idem/token.h"

namespace idem {
namespace {

// Idle connections kept for reuse; more are closed when returned.
constexpr std::size_t kMaxIdleConnections = 64;
// Write calls that one transaction of the writer takes at most.
constexpr std::size_t kMaxBatch = 64;

// The writer counts the WAL's frames after each commit: past
// kCheckpointFrames (SQLite's own wal_autocheckpoint default) it wakes the
// checkpointer thread; past kInlineCheckpointFrames, when the checkpointer
// could not keep up, it checkpoints itself, so that the WAL stays bounded
// (~16 MiB of 4 KiB pages) and is reset from its start now and then.
constexpr int kCheckpointFrames = 1000;
constexpr int kInlineCheckpointFrames = 4 * kCheckpointFrames;
// The largest page cache `cache_mb` takes (1 TiB), far above any machine's
// memory but well inside what PRAGMA cache_size's KiB count holds.
constexpr std::uint64_t kMaxCacheMb = 1 << 20;
// Rows one PurgeExpired transaction deletes.
constexpr std::size_t kPurgeBatch = 1000;

enum StatementId {
  kClaimUpsert,
  kSelect,
  kComplete,
  kRelease,
  kRevoke,
  kPurge,
  kBegin,
  kCommit,
  kSavepoint,
  kSavepointRelease,
  kSavepointRollback,
  kStatementCount,
};

// Column names in SET and WHERE of the DO UPDATE refer to the existing row,
// `excluded.` to the one the INSERT proposed. `takeovers` counts the
// takeovers of the current claim's key since it was last claimed afresh, so
// RETURNING tells a takeover (> 0) from a new or expired record (0).
constexpr const char* kSql[kStatementCount] = {
    // kClaimUpsert: ?1 id, ?2 fingerprint, ?3 token, ?4 locked_until,
    // ?5 expires_at, ?6 record, ?7 now.
    "INSERT INTO idem_records (id, state, fingerprint, token, locked_until, "
    "expires_at, takeovers, record) VALUES (?1, 1, ?2, ?3, ?4, ?5, 0, ?6) "
    "ON CONFLICT (id) DO UPDATE SET state = 1, "
    "fingerprint = excluded.fingerprint, token = excluded.token, "
    "locked_until = excluded.locked_until, expires_at = excluded.expires_at, "
    "takeovers = CASE WHEN expires_at > ?7 THEN takeovers + 1 ELSE 0 END, "
    "record = excluded.record "
    "WHERE expires_at <= ?7 OR (state = 1 AND "
    "fingerprint = excluded.fingerprint AND locked_until <= ?7) "
    "RETURNING takeovers",
    // kSelect: ?1 id.
    "SELECT state, fingerprint, token, locked_until, expires_at, record "
    "FROM idem_records WHERE id = ?1",
    // kComplete: ?1 id, ?2 token, ?3 record.
    "UPDATE idem_records SET state = 2, record = ?3 "
    "WHERE id = ?1 AND token = ?2 AND state = 1",
    // kRelease: ?1 id, ?2 token.
    "DELETE FROM idem_records WHERE id = ?1 AND token = ?2 AND state = 1",
    // kRevoke: ?1 id.
    "DELETE FROM idem_records WHERE id = ?1",
    // kPurge: ?1 now, ?2 limit.
    "DELETE FROM idem_records WHERE id IN (SELECT id FROM idem_records "
    "WHERE expires_at <= ?1 LIMIT ?2)",
    // The writer's transactions, and one savepoint per call in them.
    "BEGIN IMMEDIATE",
    "COMMIT",
    "SAVEPOINT idem_call",
    "RELEASE idem_call",
    "ROLLBACK TO idem_call",
};

constexpr const char* kCreateSchemaV2[] = {
    "CREATE TABLE idem_records ("
    "id BLOB PRIMARY KEY NOT NULL, "
    "state INTEGER NOT NULL, "
    "fingerprint BLOB NOT NULL, "
    "token BLOB NOT NULL, "
    "locked_until INTEGER NOT NULL, "
    "expires_at INTEGER NOT NULL, "
    "takeovers INTEGER NOT NULL DEFAULT 0, "
    "record BLOB NOT NULL) WITHOUT ROWID",
    "CREATE INDEX idem_records_expires_at ON idem_records (expires_at)",
};

std::int64_t Ns(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

std::string Prefix(const std::string& path) {
  return "sqlite store '" + path + "': ";
}

tl::unexpected<Error> Unexpected(Error e) {
  return tl::unexpected<Error>(std::move(e));
}

ErrorCode CodeOf(int rc) {
  switch (rc & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PROTOCOL:
      return ErrorCode::kUnavailable;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return ErrorCode::kDataLoss;
    case SQLITE_NOMEM:
      return ErrorCode::kResourceExhausted;
    default:
      return ErrorCode::kInternal;
  }
}

// Every public call runs inside this boundary (idem/catch_exceptions.h).
template <typename Fn>
auto Boundary(const std::string& path, std::string_view op, Fn&& fn)
    -> decltype(fn()) {
  return CatchExceptions([&] { return Prefix(path) + std::string(op); },
                         std::forward<Fn>(fn));
}

const char* PragmaValue(SqliteSynchronous s) {
  switch (s) {
    case SqliteSynchronous::kOff:
      return "OFF";
    case SqliteSynchronous::kNormal:
      return "NORMAL";
    case SqliteSynchronous::kFull:
      return "FULL";
    case SqliteSynchronous::kExtra:
      return "EXTRA";
  }
  return "NORMAL";
}

// Resets a statement (and drops its bindings) when the scope ends, before
// the buffers bound with SQLITE_STATIC go away.
class StatementScope {
 public:
  explicit StatementScope(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~StatementScope() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  StatementScope(const StatementScope&) = delete;
  StatementScope& operator=(const StatementScope&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

int BindBlob(sqlite3_stmt* stmt, int index, std::string_view bytes) {
  return sqlite3_bind_blob64(stmt, index, bytes.data(), bytes.size(),
                             SQLITE_STATIC);
}

std::string_view ColumnBlob(sqlite3_stmt* stmt, int column) {
  const void* data = sqlite3_column_blob(stmt, column);
  const int size = sqlite3_column_bytes(stmt, column);
  if (data == nullptr || size <= 0) return {};
  return {static_cast<const char*>(data), static_cast<std::size_t>(size)};
}

// One connection (the writer, the checkpointer's or a pooled reader) and its
// prepared statements.
class Connection {
 public:
  Connection(sqlite3* db) : db_(db) {}
  ~Connection() {
    for (sqlite3_stmt* s : statements_) sqlite3_finalize(s);
    sqlite3_close_v2(db_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* db() const { return db_; }

  // The cached statement, prepared on first use; nullptr with `*rc` set on
  // failure.
  sqlite3_stmt* Get(StatementId id, int* rc) {
    sqlite3_stmt*& s = statements_[id];
    *rc = SQLITE_OK;
    if (s == nullptr) {
      *rc = sqlite3_prepare_v3(db_, kSql[id], -1, SQLITE_PREPARE_PERSISTENT, &s,
                               nullptr);
      if (*rc != SQLITE_OK) {
        sqlite3_finalize(s);
        s = nullptr;
      }
    }
    return s;
  }

 private:
  sqlite3* const db_;
  std::array<sqlite3_stmt*, kStatementCount> statements_{};
};

// A decoded row: the record, checked against the columns.
struct Row {
  Record record;
};

}  // namespace

class SqliteStore::Impl {
 public:
  explicit Impl(const SqliteStoreOptions& options) : options_(options) {
    batch_.reserve(kMaxBatch);
  }

  ~Impl() {
    StopCheckpointer();
    checkpoint_conn_.reset();
    writer_.reset();
    std::lock_guard<std::mutex> lock(pool_mu_);
    idle_.clear();
  }

  const std::string& path() const { return options_.path; }

  Error SqlError(std::string_view op, sqlite3* db, int rc) const {
    std::string message =
        Prefix(path()) + std::string(op) + ": " + sqlite3_errstr(rc);
    if (db != nullptr) {
      const char* detail = sqlite3_errmsg(db);
      if (detail != nullptr && std::string_view(detail) != sqlite3_errstr(rc)) {
        message += std::string(" (") + detail + ")";
      }
    }
    if ((rc & 0xFF) == SQLITE_BUSY || (rc & 0xFF) == SQLITE_LOCKED) {
      message += "; another connection held the database beyond busy_timeout=" +
                 std::to_string(options_.busy_timeout.count()) + " ms";
    }
    return Error(CodeOf(rc), std::move(message));
  }

  // ---- Connections ---------------------------------------------------------

  // A borrowed connection, returned to the pool when the lease ends; a
  // connection left inside a transaction by a failed call is rolled back
  // first (or closed if that fails too).
  class Lease {
   public:
    Lease(Impl* impl, std::unique_ptr<Connection> conn)
        : impl_(impl), conn_(std::move(conn)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (conn_ != nullptr) impl_->Return(std::move(conn_));
    }
    Connection* operator->() const { return conn_.get(); }
    Connection& operator*() const { return *conn_; }

   private:
    Impl* impl_;
    std::unique_ptr<Connection> conn_;
  };

  Result<std::unique_ptr<Connection>> OpenConnection() {
    sqlite3* db = nullptr;
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                      SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
    int rc = sqlite3_open_v2(path().c_str(), &db, flags, nullptr);
    if (rc != SQLITE_OK) {
      Error e = SqlError("open", db, rc);
      sqlite3_close_v2(db);
      return Unexpected(std::move(e));
    }
    auto conn = std::make_unique<Connection>(db);
    sqlite3_busy_timeout(db, static_cast<int>(options_.busy_timeout.count()));
    const std::string pragmas = std::string("PRAGMA synchronous = ") +
                                PragmaValue(options_.synchronous);
    rc = sqlite3_exec(db, pragmas.c_str(), nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Unexpected(SqlError("open", db, rc));
    return conn;
  }

  Result<Lease> Acquire() {
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      if (!idle_.empty()) {
        std::unique_ptr<Connection> conn = std::move(idle_.back());
        idle_.pop_back();
        return Lease(this, std::move(conn));
      }
    }
    auto conn = OpenConnection();
    if (!conn) return Unexpected(conn.error());
    return Lease(this, std::move(*conn));
  }

  void Return(std::unique_ptr<Connection> conn) {
    if (sqlite3_get_autocommit(conn->db()) == 0 &&
        sqlite3_exec(conn->db(), "ROLLBACK", nullptr, nullptr, nullptr) !=
            SQLITE_OK) {
      return;  // Closed: a connection stuck in a transaction is useless.
    }
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(conn));
  }

  // ---- Schema --------------------------------------------------------------

  Status Exec(Connection& conn, const char* sql, std::string_view op) {
    const int rc = sqlite3_exec(conn.db(), sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Unexpected(SqlError(op, conn.db(), rc));
    return {};
  }

  Result<std::int64_t> QueryInt(Connection& conn, const char* sql,
                                std::string_view op) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(conn.db(), sql, -1, &stmt, nullptr);
    if (rc != SQLITE_OK) return Unexpected(SqlError(op, conn.db(), rc));
    rc = sqlite3_step(stmt);
    const std::int64_t value =
        rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
    if (rc == SQLITE_ROW) rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) return Unexpected(SqlError(op, conn.db(), rc));
    return value;
  }

  Status SwitchToWal(Connection& conn) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(conn.db(), "PRAGMA journal_mode = WAL", -1,
                                &stmt, nullptr);
    if (rc != SQLITE_OK) {
      return Unexpected(SqlError("journal_mode", conn.db(), rc));
    }
    rc = sqlite3_step(stmt);
    std::string mode;
    if (rc == SQLITE_ROW) {
      const unsigned char* text = sqlite3_column_text(stmt, 0);
      if (text != nullptr) mode = reinterpret_cast<const char*>(text);
      rc = sqlite3_step(stmt);
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
      return Unexpected(SqlError("journal_mode", conn.db(), rc));
    }
    if (mode != "wal") {
      return MakeError(ErrorCode::kUnavailable,
                       Prefix(path()) + "cannot switch to WAL mode (got '" +
                           mode + "'; is the file on a local file system?)");
    }
    return {};
  }

  // v1 -> v2: the columns are decoded from each record. A record that does
  // not decode keeps its bytes with columns that never match a claim's
  // conditions or the purge (state 0, expires_at = max), so it stays
  // kDataLoss on read instead of disappearing.
  Status MigrateV1ToV2(Connection& conn) {
    for (const char* sql : kCreateSchemaV2) {
      if (Status s = Exec(conn, sql, "migrate v1 to v2"); !s) return s;
    }
    sqlite3_stmt* read = nullptr;
    sqlite3_stmt* write = nullptr;
    int rc = sqlite3_prepare_v2(conn.db(), "SELECT id, record FROM idempotency",
                                -1, &read, nullptr);
    if (rc == SQLITE_OK) {
      rc = sqlite3_prepare_v2(
          conn.db(),
          "INSERT INTO idem_records (id, state, fingerprint, token, "
          "locked_until, expires_at, takeovers, record) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)",
          -1, &write, nullptr);
    }
    while (rc == SQLITE_OK || rc == SQLITE_DONE) {
      rc = sqlite3_step(read);
      if (rc != SQLITE_ROW) break;
      const std::string_view id = ColumnBlob(read, 0);
      const std::string_view blob = ColumnBlob(read, 1);
      Result<Record> record = DecodeRecord(blob);
      Record columns;
      if (record) {
        columns = *record;
      } else {
        columns.state = static_cast<RecordState>(0);
        columns.locked_until = TimePoint::max();
        columns.expires_at = TimePoint::max();
      }
      BindBlob(write, 1, id);
      sqlite3_bind_int(write, 2, static_cast<int>(columns.state));
      BindBlob(write, 3, columns.fingerprint.view());
      BindBlob(write, 4, columns.token.view());
      sqlite3_bind_int64(write, 5, Ns(columns.locked_until));
      sqlite3_bind_int64(write, 6, Ns(columns.expires_at));
      BindBlob(write, 7, blob);
      rc = sqlite3_step(write);
      sqlite3_reset(write);
      sqlite3_clear_bindings(write);
      if (rc != SQLITE_DONE) break;
    }
    sqlite3_finalize(read);
    sqlite3_finalize(write);
    if (rc != SQLITE_DONE) {
      return Unexpected(SqlError("migrate v1 to v2", conn.db(), rc));
    }
    return Exec(conn, "DROP TABLE idempotency", "migrate v1 to v2");
  }

  // Creates or migrates the schema in one write transaction: several
  // processes opening a new file at once serialize here, and the later ones
  // find the schema in place.
  Status PrepareSchema(Connection& conn) {
    if (Status s = SwitchToWal(conn); !s) return s;
    if (Status s = Exec(conn, "BEGIN IMMEDIATE", "schema"); !s) return s;
    auto version = QueryInt(conn, "PRAGMA user_version", "schema");
    if (!version) return Unexpected(version.error());
    if (*version > kSchemaVersion) {
      return MakeError(ErrorCode::kInvalidArgument,
                       Prefix(path()) + "schema version " +
                           std::to_string(*version) +
                           " is newer than this build of idem knows (" +
                           std::to_string(kSchemaVersion) + ")");
    }
    if (*version < kSchemaVersion) {
      if (*version == 1) {
        if (Status s = MigrateV1ToV2(conn); !s) return s;
      } else if (*version == 0) {
        for (const char* sql : kCreateSchemaV2) {
          if (Status s = Exec(conn, sql, "create schema"); !s) return s;
        }
      } else {
        return MakeError(ErrorCode::kInvalidArgument,
                         Prefix(path()) + "unknown schema version " +
                             std::to_string(*version));
      }
      const std::string set_version =
          "PRAGMA user_version = " + std::to_string(kSchemaVersion);
      if (Status s = Exec(conn, set_version.c_str(), "schema"); !s) return s;
    }
    return Exec(conn, "COMMIT", "schema");
  }

  Status Start() {
    auto lease = Acquire();
    if (!lease) return Unexpected(lease.error());
    if (Status s = PrepareSchema(**lease); !s) return s;
    if (Status s = OpenWriter(); !s) return s;
    auto checkpoint_conn = OpenConnection();
    if (!checkpoint_conn) return Unexpected(checkpoint_conn.error());
    checkpoint_conn_ = std::move(*checkpoint_conn);
    checkpointer_ = std::thread([this] { CheckpointLoop(); });
    return {};
  }

  // ---- The writer ----------------------------------------------------------
  //
  // Every write of this process goes through one connection, one call at a
  // time, and calls that arrive while a transaction runs are committed
  // together in the next one (group commit). See sqlite_store.h for why.

  class WriteOp {
   public:
    virtual ~WriteOp() = default;
    virtual void Run(Connection& conn) = 0;
    virtual void Fail(const Error& e) = 0;
    virtual bool ok() const = 0;
    // Only when !ok().
    virtual const Error& error() const = 0;
    bool done = false;  // Guarded by write_mu_.
  };

  template <typename T, typename Fn>
  class TypedWriteOp final : public WriteOp {
   public:
    TypedWriteOp(const std::string& path, Fn& fn) : path_(path), fn_(fn) {}
    void Run(Connection& conn) override {
      result = Boundary(path_, "write", [&] { return fn_(conn); });
    }
    void Fail(const Error& e) override { result = tl::unexpected(e); }
    bool ok() const override { return result.has_value(); }
    const Error& error() const override { return result.error(); }

    Result<T> result =
        tl::unexpected(Error(ErrorCode::kInternal, "write not run"));

   private:
    const std::string& path_;
    Fn& fn_;
  };

  Status OpenWriter() {
    auto conn = OpenConnection();
    if (!conn) return Unexpected(conn.error());
    writer_ = std::move(*conn);
    if (options_.cache_mb > 0) {
      // Negative: a size in KiB rather than in pages.
      const std::string pragma =
          "PRAGMA cache_size = -" + std::to_string(options_.cache_mb * 1024);
      if (Status s = Exec(*writer_, pragma.c_str(), "open"); !s) {
        writer_.reset();
        return s;
      }
    }
    // Replaces SQLite's automatic checkpoint, which would copy the WAL into
    // the database file and fsync both inside the commit of whichever call
    // crossed the threshold, while every other write of this process waits.
    sqlite3_wal_hook(writer_->db(), &Impl::WalHook, this);
    return {};
  }

  static int WalHook(void* arg, sqlite3* db, const char*, int frames) {
    auto* impl = static_cast<Impl*>(arg);
    int done = impl->checkpointed_frames_.load(std::memory_order_relaxed);
    if (frames < done) {
      // The WAL started again from its beginning.
      done = 0;
      impl->checkpointed_frames_.store(0, std::memory_order_relaxed);
    }
    if (frames >= kInlineCheckpointFrames) {
      // The checkpointer fell far behind: checkpoint here, so that the WAL
      // stays bounded.
      sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                                nullptr);
    } else if (frames - done >= kCheckpointFrames) {
      bool wake = false;
      {
        std::lock_guard<std::mutex> lock(impl->checkpoint_mu_);
        if (!impl->checkpoint_running_) wake = impl->checkpoint_wanted_ = true;
      }
      if (wake) impl->checkpoint_cv_.notify_one();
    }
    return SQLITE_OK;
  }

  void CheckpointLoop() {
    std::unique_lock<std::mutex> lock(checkpoint_mu_);
    for (;;) {
      checkpoint_cv_.wait(
          lock, [this] { return checkpoint_wanted_ || checkpoint_stop_; });
      if (checkpoint_stop_) return;
      checkpoint_wanted_ = false;
      checkpoint_running_ = true;
      lock.unlock();
      // PASSIVE: never waits for readers or writers; whatever it cannot
      // copy now is left for the next round. Errors (another process's
      // checkpoint running, say) are left for the next round too.
      int log = 0, copied = 0;
      if (sqlite3_wal_checkpoint_v2(checkpoint_conn_->db(), nullptr,
                                    SQLITE_CHECKPOINT_PASSIVE, &log,
                                    &copied) == SQLITE_OK) {
        checkpointed_frames_.store(copied, std::memory_order_relaxed);
      }
      lock.lock();
      checkpoint_running_ = false;
    }
  }

  void StopCheckpointer() {
    if (!checkpointer_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(checkpoint_mu_);
      checkpoint_stop_ = true;
    }
    checkpoint_cv_.notify_all();
    checkpointer_.join();
  }

  // Runs fn(Connection&) -> Result<T> on the writer connection, in a
  // transaction shared with the calls queued beside it; returns once that
  // transaction committed (or failed).
  template <typename T, typename Fn>
  Result<T> Write(Fn&& fn) {
    TypedWriteOp<T, Fn> op(path(), fn);
    std::unique_lock<std::mutex> lock(write_mu_);
    write_queue_.push_back(&op);
    while (!op.done && writing_) write_cv_.wait(lock);
    if (op.done) return std::move(op.result);
    // Nobody is writing: this thread writes what is queued, its own call
    // among them (the queue is at most kMaxBatch long when nobody writes:
    // every writer takes up to kMaxBatch, and whoever queued beyond waits
    // and then writes the rest).
    writing_ = true;
    // batch_ has room for kMaxBatch: nothing below allocates, so nothing
    // throws while writing_ is set.
    std::vector<WriteOp*>& batch = batch_;
    const std::size_t n = std::min(write_queue_.size(), kMaxBatch);
    batch.assign(write_queue_.begin(), write_queue_.begin() + n);
    write_queue_.erase(write_queue_.begin(), write_queue_.begin() + n);
    lock.unlock();
    RunBatch(batch);
    lock.lock();
    for (WriteOp* w : batch) w->done = true;
    batch.clear();
    writing_ = false;
    lock.unlock();
    write_cv_.notify_all();
    return std::move(op.result);
  }

  // Runs one of the writer's transaction statements; its error, or nullopt.
  std::optional<Error> StepWriter(StatementId id, std::string_view op) {
    int rc;
    sqlite3_stmt* stmt = writer_->Get(id, &rc);
    if (stmt == nullptr) return SqlError(op, writer_->db(), rc);
    rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    if (rc == SQLITE_DONE) return std::nullopt;
    return SqlError(op, writer_->db(), rc);
  }

  void FailAll(const std::vector<WriteOp*>& batch, const Error& e) {
    for (WriteOp* w : batch) w->Fail(e);
  }

  // One write transaction for the batch (of two calls or more). A call that
  // fails writes nothing (its savepoint is rolled back) and leaves the
  // others be; an error that ends the whole transaction (SQLite rolls back on
  // I/O errors and a full disk), or a failed COMMIT, fails every call of the
  // batch.
  void RunBatch(const std::vector<WriteOp*>& batch) {
    if (writer_ == nullptr) {
      if (Status s = OpenWriter(); !s) return FailAll(batch, s.error());
    }
    sqlite3* db = writer_->db();
    if (batch.size() == 1) {
      // Alone, a call runs in autocommit mode, as it would on a connection
      // of its own: each of its statements is a transaction, and a failed
      // one wrote nothing. Measured cheaper than BEGIN ... COMMIT around it
      // (~55-59 against 61-72 us of CPU per Claim+Complete, one thread).
      batch.front()->Run(*writer_);
      if (sqlite3_get_autocommit(db) == 0 &&
          sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr) !=
              SQLITE_OK) {
        writer_.reset();
      }
      return;
    }
    std::optional<Error> fatal = StepWriter(kBegin, "begin");
    bool wrote = false;
    std::size_t ran = 0;
    for (WriteOp* w : batch) {
      if (fatal) break;
      if ((fatal = StepWriter(kSavepoint, "savepoint"))) break;
      w->Run(*writer_);
      ++ran;
      if (sqlite3_get_autocommit(db) != 0) {
        fatal = w->ok()
                    ? Error(ErrorCode::kInternal,
                            Prefix(path()) + "write transaction ended early")
                    : Error(w->error().code(),
                            Prefix(path()) +
                                "write transaction rolled back by the "
                                "error of a call committed with this "
                                "one: " +
                                w->error().message());
        break;
      }
      if (w->ok()) {
        fatal = StepWriter(kSavepointRelease, "savepoint");
        wrote = true;
      } else {
        fatal = StepWriter(kSavepointRollback, "savepoint");
        if (!fatal) fatal = StepWriter(kSavepointRelease, "savepoint");
      }
    }
    if (!fatal && wrote) fatal = StepWriter(kCommit, "commit");
    if (fatal) {
      // Calls that failed on their own keep their error; nothing of the
      // others was written.
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (i >= ran || batch[i]->ok()) batch[i]->Fail(*fatal);
      }
    }
    // After an error, or when no call wrote anything: nothing to keep.
    if (sqlite3_get_autocommit(db) == 0 &&
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr) != SQLITE_OK) {
      writer_.reset();  // Reopened by the next batch.
    }
  }

  // ---- Rows ----------------------------------------------------------------

  Error DataLoss(const RecordId& id, std::string_view why) const {
    return Error(ErrorCode::kDataLoss, Prefix(path()) + "record " + id.ToHex() +
                                           " " + std::string(why));
  }

  // The row of `id` (nullopt when absent), decoded and checked against its
  // columns.
  Result<std::optional<Row>> SelectRow(Connection& conn, const RecordId& id) {
    int rc;
    sqlite3_stmt* stmt = conn.Get(kSelect, &rc);
    if (stmt == nullptr) return Unexpected(SqlError("select", conn.db(), rc));
    StatementScope scope(stmt);
    BindBlob(stmt, 1, id.view());
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) return std::optional<Row>();
    if (rc != SQLITE_ROW) return Unexpected(SqlError("select", conn.db(), rc));
    Result<Record> record = DecodeRecord(ColumnBlob(stmt, 5));
    if (!record) {
      return Unexpected(
          DataLoss(id, "does not decode: " + record.error().message()));
    }
    const bool agree =
        sqlite3_column_int(stmt, 0) == static_cast<int>(record->state) &&
        ColumnBlob(stmt, 1) == record->fingerprint.view() &&
        ColumnBlob(stmt, 2) == record->token.view() &&
        sqlite3_column_int64(stmt, 3) == Ns(record->locked_until) &&
        sqlite3_column_int64(stmt, 4) == Ns(record->expires_at);
    if (!agree) return Unexpected(DataLoss(id, "disagrees with its columns"));
    Row row;
    row.record = std::move(*record);
    return std::optional<Row>(std::move(row));
  }

  // ---- Claim
  // -----------------------------------------------------------------

  static ClaimResult Acquired(const Record& fresh, bool takeover) {
    ClaimResult result;
    result.outcome = ClaimOutcome::kAcquired;
    result.token = fresh.token;
    result.takeover = takeover;
    result.locked_until = fresh.locked_until;
    return result;
  }

  Result<ClaimResult> ClaimWithUpsert(Connection& conn, const RecordId& id,
                                      const Fingerprint& fp, TimePoint now,
                                      Duration ttl, Duration lock_timeout) {
    const Record fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
    const std::string blob = EncodeRecord(fresh);
    for (int attempt = 0; attempt < SqliteStore::kClaimAttempts; ++attempt) {
      if (claim_hook_) claim_hook_(ClaimAttemptPoint::kBeforeWrite, attempt);
      {
        int rc;
        sqlite3_stmt* stmt = conn.Get(kClaimUpsert, &rc);
        if (stmt == nullptr) {
          return Unexpected(SqlError("claim", conn.db(), rc));
        }
        StatementScope scope(stmt);
        BindBlob(stmt, 1, id.view());
        BindBlob(stmt, 2, fp.view());
        BindBlob(stmt, 3, fresh.token.view());
        sqlite3_bind_int64(stmt, 4, Ns(fresh.locked_until));
        sqlite3_bind_int64(stmt, 5, Ns(fresh.expires_at));
        BindBlob(stmt, 6, blob);
        sqlite3_bind_int64(stmt, 7, Ns(now));
        rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
          const bool takeover = sqlite3_column_int64(stmt, 0) > 0;
          // Step to the end: in autocommit mode the transaction commits
          // there, and a commit can still fail (I/O).
          rc = sqlite3_step(stmt);
          if (rc != SQLITE_DONE) {
            return Unexpected(SqlError("claim", conn.db(), rc));
          }
          return Acquired(fresh, takeover);
        }
        if (rc != SQLITE_DONE) {
          return Unexpected(SqlError("claim", conn.db(), rc));
        }
      }
      // A live record stood in the way: read it for the outcome. If it went
      // away in between (another process released, revoked or purged it; in
      // a batch's transaction nothing can) or became claimable, try again.
      if (claim_hook_) claim_hook_(ClaimAttemptPoint::kBeforeRead, attempt);
      auto row = SelectRow(conn, id);
      if (!row) return Unexpected(row.error());
      if (!row->has_value()) continue;
      if (auto blocked = ClaimBlockedBy((*row)->record, fp, now))
        return *blocked;
    }
    // Lost every race (store.h): in progress elsewhere, retry later.
    ClaimResult busy;
    busy.outcome = ClaimOutcome::kInProgress;
    busy.locked_until = now;
    return busy;
  }

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) {
    return Write<ClaimResult>([&](Connection& conn) {
      return ClaimWithUpsert(conn, id, fp, now, ttl, lock_timeout);
    });
  }

  // ---- Complete, Release, Inspect, PurgeExpired ----------------------------

  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) {
    return Write<bool>([&](Connection& conn) {
      return CompleteOn(conn, id, token, response);
    });
  }

  Result<bool> CompleteOn(Connection& conn, const RecordId& id,
                          const Token& token, const Response& response) {
    auto row = SelectRow(conn, id);
    if (!row) return Unexpected(row.error());
    if (!row->has_value()) return false;
    Record& record = (*row)->record;
    if (record.state != RecordState::kInProgress || record.token != token) {
      return false;
    }
    record.state = RecordState::kCompleted;
    // Non-owning: the caller's response outlives the encoding below.
    record.response = std::shared_ptr<const Response>(
        std::shared_ptr<const Response>(), &response);
    const std::string blob = EncodeRecord(record);
    int rc;
    sqlite3_stmt* stmt = conn.Get(kComplete, &rc);
    if (stmt == nullptr) return Unexpected(SqlError("complete", conn.db(), rc));
    StatementScope scope(stmt);
    BindBlob(stmt, 1, id.view());
    BindBlob(stmt, 2, token.view());
    BindBlob(stmt, 3, blob);
    rc = sqlite3_step(stmt);
    if (rc != SQLITE_DONE) {
      return Unexpected(SqlError("complete", conn.db(), rc));
    }
    // The token is new for every claim: if the row still has it, and is
    // still in progress, it is the row read above.
    return sqlite3_changes(conn.db()) == 1;
  }

  Result<bool> Release(const RecordId& id, const Token& token) {
    return Write<bool>(
        [&](Connection& conn) { return ReleaseOn(conn, id, token); });
  }

  Result<bool> ReleaseOn(Connection& conn, const RecordId& id,
                         const Token& token) {
    int rc;
    sqlite3_stmt* stmt = conn.Get(kRelease, &rc);
    if (stmt == nullptr) return Unexpected(SqlError("release", conn.db(), rc));
    StatementScope scope(stmt);
    BindBlob(stmt, 1, id.view());
    BindBlob(stmt, 2, token.view());
    rc = sqlite3_step(stmt);
    if (rc != SQLITE_DONE) {
      return Unexpected(SqlError("release", conn.db(), rc));
    }
    return sqlite3_changes(conn.db()) == 1;
  }

  Result<bool> Revoke(const RecordId& id) {
    return Write<bool>([&](Connection& conn) -> Result<bool> {
      int rc;
      sqlite3_stmt* stmt = conn.Get(kRevoke, &rc);
      if (stmt == nullptr) {
        return Unexpected(SqlError("revoke", conn.db(), rc));
      }
      StatementScope scope(stmt);
      BindBlob(stmt, 1, id.view());
      rc = sqlite3_step(stmt);
      if (rc != SQLITE_DONE) {
        return Unexpected(SqlError("revoke", conn.db(), rc));
      }
      return sqlite3_changes(conn.db()) == 1;
    });
  }

  void SetClaimHook(ClaimAttemptHook hook) { claim_hook_ = std::move(hook); }

  Result<std::optional<Record>> Inspect(const RecordId& id, TimePoint now) {
    auto lease = Acquire();
    if (!lease) return Unexpected(lease.error());
    auto row = SelectRow(**lease, id);
    if (!row) return Unexpected(row.error());
    if (!row->has_value() || (*row)->record.Expired(now)) {
      return std::optional<Record>();
    }
    return std::optional<Record>(std::move((*row)->record));
  }

  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) {
    if (limit == 0) return std::size_t{0};
    std::size_t deleted = 0;
    while (deleted < limit) {
      const std::size_t batch = std::min(kPurgeBatch, limit - deleted);
      // One write call per batch, so that the other writers of this process
      // wait for one batch at most, as those of other processes do.
      auto n = Write<std::size_t>([&](Connection& conn) -> Result<std::size_t> {
        int rc;
        sqlite3_stmt* stmt = conn.Get(kPurge, &rc);
        if (stmt == nullptr) {
          return Unexpected(SqlError("purge", conn.db(), rc));
        }
        StatementScope scope(stmt);
        sqlite3_bind_int64(stmt, 1, Ns(now));
        sqlite3_bind_int64(stmt, 2, static_cast<sqlite3_int64>(batch));
        rc = sqlite3_step(stmt);
        if (rc != SQLITE_DONE) {
          return Unexpected(SqlError("purge", conn.db(), rc));
        }
        return static_cast<std::size_t>(sqlite3_changes(conn.db()));
      });
      if (!n) return Unexpected(n.error());
      deleted += *n;
      if (*n < batch) break;
    }
    return deleted;
  }

 private:
  const SqliteStoreOptions options_;

  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Connection>> idle_;

  // The writer: its connection is used by the thread that set writing_.
  std::mutex write_mu_;
  std::condition_variable write_cv_;
  std::vector<WriteOp*> write_queue_;  // Guarded by write_mu_.
  bool writing_ = false;               // Guarded by write_mu_.
  std::vector<WriteOp*> batch_;        // Used by the thread writing.
  std::unique_ptr<Connection> writer_;

  std::unique_ptr<Connection> checkpoint_conn_;
  std::thread checkpointer_;
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool checkpoint_wanted_ = false;   // Guarded by checkpoint_mu_.
  bool checkpoint_stop_ = false;     // Guarded by checkpoint_mu_.
  bool checkpoint_running_ = false;  // Guarded by checkpoint_mu_.
  std::atomic<int> checkpointed_frames_{0};

  ClaimAttemptHook claim_hook_;  // Set before use, by tests only.
};

SqliteStore::SqliteStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SqliteStore::~SqliteStore() = default;

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    const SqliteStoreOptions& options, const StoreOptions& store_options) {
  const std::string& path = options.path;
  if (path.empty() || path == ":memory:") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "sqlite store: the database file path is empty or "
                     "':memory:' (a pooled store needs a file)");
  }
  if (options.busy_timeout < std::chrono::milliseconds::zero() ||
      options.busy_timeout > SqliteStoreOptions::kMaxBusyTimeout) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        Prefix(path) + "busy_timeout must be from 0 to " +
            std::to_string(SqliteStoreOptions::kMaxBusyTimeout.count()) +
            " ms, got " + std::to_string(options.busy_timeout.count()));
  }
  if (options.cache_mb > kMaxCacheMb) {
    return MakeError(ErrorCode::kInvalidArgument,
                     Prefix(path) + "cache_mb out of range (at most " +
                         std::to_string(kMaxCacheMb) + ")");
  }
  if (sqlite3_threadsafe() == 0) {
    return MakeError(ErrorCode::kInternal,
                     Prefix(path) + "SQLite was built without thread support");
  }
  return Boundary(path, "open", [&]() -> Result<std::unique_ptr<SqliteStore>> {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       Prefix(path) + "is a directory, not a database file");
    }
    const std::filesystem::path parent =
        std::filesystem::path(path).parent_path();
    if (!parent.empty()) {
      std::filesystem::create_directories(parent, ec);
      if (ec) {
        return MakeError(
            ErrorCode::kUnavailable,
            Prefix(path) + "cannot create its directory: " + ec.message());
      }
    }
    (void)store_options;  // No background work of its own reads a clock.
    auto impl = std::make_unique<Impl>(options);
    if (Status s = impl->Start(); !s) return Unexpected(s.error());
    return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(impl)));
  });
}

Result<std::unique_ptr<Store>> SqliteStore::OpenFromUri(
    StoreUri& uri, const StoreOptions& options) {
  if (uri.scheme() != "sqlite") {
    return tl::unexpected(
        uri.InvalidArgument("scheme '" + uri.scheme() + "' is not sqlite"));
  }
  if (Status local = uri.RequireLocalPath(
          "the sqlite store takes a file: sqlite:/path/file.db");
      !local) {
    return tl::unexpected(local.error());
  }
  SqliteStoreOptions sqlite_options;
  sqlite_options.path = uri.path();
  auto synchronous =
      uri.TakeEnum("synchronous", {"off", "normal", "full", "extra"});
  if (!synchronous) return tl::unexpected(synchronous.error());
  if (synchronous->has_value()) {
    const std::string& s = **synchronous;
    sqlite_options.synchronous = s == "off"      ? SqliteSynchronous::kOff
                                 : s == "normal" ? SqliteSynchronous::kNormal
                                 : s == "full"   ? SqliteSynchronous::kFull
                                                 : SqliteSynchronous::kExtra;
  }
  auto busy = uri.TakeDuration("busy_timeout_ms", std::chrono::milliseconds(0),
                               SqliteStoreOptions::kMaxBusyTimeout);
  if (!busy) return tl::unexpected(busy.error());
  if (busy->has_value()) sqlite_options.busy_timeout = **busy;
  auto cache = uri.TakeUint("cache_mb", 0, kMaxCacheMb);
  if (!cache) return tl::unexpected(cache.error());
  if (cache->has_value()) sqlite_options.cache_mb = **cache;
  if (Status unknown = uri.RejectUnknown(); !unknown) {
    return tl::unexpected(unknown.error());
  }
  auto store = Open(sqlite_options, options);
  if (!store) return tl::unexpected(store.error());
  return std::unique_ptr<Store>(std::move(*store));
}

Result<ClaimResult> SqliteStore::Claim(const RecordId& id,
                                       const Fingerprint& fp, TimePoint now,
                                       Duration ttl, Duration lock_timeout) {
  if (ttl <= Duration::zero() || lock_timeout <= Duration::zero()) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        Prefix(impl_->path()) + "ttl and lock_timeout must be positive");
  }
  return Boundary(impl_->path(), "claim",
                  [&] { return impl_->Claim(id, fp, now, ttl, lock_timeout); });
}

Result<bool> SqliteStore::Complete(const RecordId& id, const Token& token,
                                   const Response& response) {
  return Boundary(impl_->path(), "complete",
                  [&] { return impl_->Complete(id, token, response); });
}

Result<bool> SqliteStore::Release(const RecordId& id, const Token& token) {
  return Boundary(impl_->path(), "release",
                  [&] { return impl_->Release(id, token); });
}

Result<bool> SqliteStore::Revoke(const RecordId& id) {
  return Boundary(impl_->path(), "revoke", [&] { return impl_->Revoke(id); });
}

void SqliteStore::SetClaimAttemptHookForTesting(ClaimAttemptHook hook) {
  impl_->SetClaimHook(std::move(hook));
}

Result<std::optional<Record>> SqliteStore::Inspect(const RecordId& id,
                                                   TimePoint now) {
  return Boundary(impl_->path(), "inspect",
                  [&] { return impl_->Inspect(id, now); });
}

Result<std::size_t> SqliteStore::PurgeExpired(TimePoint now,
                                              std::size_t limit) {
  return Boundary(impl_->path(), "purge",
                  [&] { return impl_->PurgeExpired(now, limit); });
}

StoreInfo SqliteStore::Info() const {
  return StoreInfo{
      .name = "sqlite", .durable = true, .shared_across_processes = true};
}

const std::string& SqliteStore::path() const { return impl_->path(); }

}  // namespace idem
