// One connection to the store's file (the writer's, the checkpointer's or a
// pooled reader's) with its cache of prepared statements, and the helpers
// every part of the SQLite store shares: binding and reading blobs, and
// turning SQLite's result codes into idem errors that name the file.
//
// Connections are opened in SQLite's multi-thread mode (SQLITE_OPEN_NOMUTEX):
// a connection is used by one thread at a time, which its owner (the pool,
// the writer, the checkpointer) guarantees.

#ifndef IDEM_BACKENDS_SQLITE_SQLITE_CONNECTION_H_
#define IDEM_BACKENDS_SQLITE_SQLITE_CONNECTION_H_

#include <sqlite3.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/error.h"
#include "idem/record.h"
#include "idem/sqlite_store_options.h"
#include "idem/types.h"
#include "sqlite_sql.h"

namespace idem::sqlite_internal {

// "sqlite store '<path>': ", the start of every message.
std::string Prefix(const std::string& path);

// The error of a failed SQLite call `op` on `db` (may be null): the code by
// class (busy, I/O, full, read-only -> kUnavailable; corrupt, not a
// database -> kDataLoss; out of memory -> kResourceExhausted; else
// kInternal), the message naming the file and SQLite's detail.
Error SqlError(const SqliteStoreOptions& options, std::string_view op,
               sqlite3* db, int rc);

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

// Binds `bytes` without a copy (SQLITE_STATIC): they must outlive the
// statement's next reset, which a StatementScope does.
inline int BindBlob(sqlite3_stmt* stmt, int index, std::string_view bytes) {
  return sqlite3_bind_blob64(stmt, index, bytes.data(), bytes.size(),
                             SQLITE_STATIC);
}

// The blob in `column` of the current row, valid until the next step or
// reset.
inline std::string_view ColumnBlob(sqlite3_stmt* stmt, int column) {
  const void* data = sqlite3_column_blob(stmt, column);
  const int size = sqlite3_column_bytes(stmt, column);
  if (data == nullptr || size <= 0) return {};
  return {static_cast<const char*>(data), static_cast<std::size_t>(size)};
}

// The record in the current row of a statement selecting `state,
// fingerprint, token, locked_until, expires_at, record` (kSelect's columns),
// decoded and checked against its columns; kDataLoss naming `path` when it
// does not decode or disagrees.
Result<Record> DecodeSelectedRow(sqlite3_stmt* stmt, const RecordId& id,
                                 const std::string& path);

class Connection {
 public:
  // Opens options.path (creating the file unless options.create is false),
  // with busy_timeout and synchronous as the options say. `options` must
  // outlive the connection.
  static Result<std::unique_ptr<Connection>> Open(
      const SqliteStoreOptions& options);

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* db() const { return db_; }
  const SqliteStoreOptions& options() const { return options_; }

  // SqlError for this connection.
  Error SqlError(std::string_view op, int rc) const;

  // The cached statement `id`, prepared on first use.
  Result<sqlite3_stmt*> Prepared(StatementId id, std::string_view op);

  // Steps `stmt` to its end; an error unless that is SQLITE_DONE.
  Status StepDone(sqlite3_stmt* stmt, std::string_view op);

  // Rows the last statement inserted, updated or deleted.
  int changes() const { return sqlite3_changes(db_); }

  // Runs `sql` (not cached), or one statement returning one integer.
  Status Exec(const char* sql, std::string_view op);
  Result<std::int64_t> QueryInt(const char* sql, std::string_view op);

  // Rolls back a transaction a failed call left open; false if that failed
  // too (the connection is then useless).
  bool RollBackIfInTransaction();

  // Whether a statement other than this cache's is prepared on the
  // connection (one an application prepared on the writer's connection
  // and did not finalize).
  bool HasStatementsOfOthers() const;

 private:
  Connection(sqlite3* db, const SqliteStoreOptions& options)
      : db_(db), options_(options) {}

  sqlite3* const db_;
  const SqliteStoreOptions& options_;
  std::array<sqlite3_stmt*, kStatementCount> statements_{};
};

}  // namespace idem::sqlite_internal

#endif  // IDEM_BACKENDS_SQLITE_SQLITE_CONNECTION_H_
