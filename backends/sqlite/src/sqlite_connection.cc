// A statement's bindings point at buffers of the calling frame
// (SQLITE_STATIC, no copies of large records), so every statement is reset
// before those buffers go out of scope: StatementScope does that.

#include "sqlite_connection.h"

#include <sqlite3.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "idem/store/record_codec.h"
#include "sqlite_wal_vfs.h"

namespace idem::sqlite_internal {
namespace {

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

}  // namespace

std::string Prefix(const std::string& path) {
  return "sqlite store '" + path + "': ";
}

Error SqlError(const SqliteStoreOptions& options, std::string_view op,
               sqlite3* db, int rc) {
  std::string message =
      Prefix(options.path) + std::string(op) + ": " + sqlite3_errstr(rc);
  if (db != nullptr) {
    const char* detail = sqlite3_errmsg(db);
    if (detail != nullptr && std::string_view(detail) != sqlite3_errstr(rc)) {
      message += std::string(" (") + detail + ")";
    }
  }
  if ((rc & 0xFF) == SQLITE_BUSY || (rc & 0xFF) == SQLITE_LOCKED) {
    message += "; another connection held the database beyond busy_timeout=" +
               std::to_string(options.busy_timeout.count()) + " ms";
  }
  return Error(CodeOf(rc), std::move(message));
}

Result<std::unique_ptr<Connection>> Connection::Open(
    const SqliteStoreOptions& options) {
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE |
                    (options.create ? SQLITE_OPEN_CREATE : 0) |
                    SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  int rc = sqlite3_open_v2(options.path.c_str(), &db, flags, WalBufferingVfs());
  if (rc != SQLITE_OK) {
    Error e = sqlite_internal::SqlError(options, "open", db, rc);
    sqlite3_close_v2(db);
    return tl::unexpected(std::move(e));
  }
  std::unique_ptr<Connection> conn(new Connection(db, options));
  sqlite3_busy_timeout(db, static_cast<int>(options.busy_timeout.count()));
  const std::string pragma =
      std::string("PRAGMA synchronous = ") + PragmaValue(options.synchronous);
  IDEM_RETURN_IF_ERROR(conn->Exec(pragma.c_str(), "open"));
  return conn;
}

Connection::~Connection() {
  for (sqlite3_stmt* s : statements_) sqlite3_finalize(s);
  sqlite3_close_v2(db_);
}

Error Connection::SqlError(std::string_view op, int rc) const {
  return sqlite_internal::SqlError(options_, op, db_, rc);
}

Result<sqlite3_stmt*> Connection::Prepared(StatementId id,
                                           std::string_view op) {
  sqlite3_stmt*& s = statements_[id];
  if (s == nullptr) {
    const int rc = sqlite3_prepare_v3(db_, kSql[id], -1,
                                      SQLITE_PREPARE_PERSISTENT, &s, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(s);
      s = nullptr;
      return tl::unexpected(SqlError(op, rc));
    }
  }
  return s;
}

Status Connection::StepDone(sqlite3_stmt* stmt, std::string_view op) {
  const int rc = sqlite3_step(stmt);
  if (rc != SQLITE_DONE) return tl::unexpected(SqlError(op, rc));
  return {};
}

Status Connection::Exec(const char* sql, std::string_view op) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return tl::unexpected(SqlError(op, rc));
  return {};
}

Result<std::int64_t> Connection::QueryInt(const char* sql,
                                          std::string_view op) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return tl::unexpected(SqlError(op, rc));
  rc = sqlite3_step(stmt);
  const std::int64_t value =
      rc == SQLITE_ROW ? sqlite3_column_int64(stmt, 0) : 0;
  if (rc == SQLITE_ROW) rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return tl::unexpected(SqlError(op, rc));
  return value;
}

bool Connection::RollBackIfInTransaction() {
  return sqlite3_get_autocommit(db_) != 0 ||
         sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr) == SQLITE_OK;
}

bool Connection::HasStatementsOfOthers() const {
  for (sqlite3_stmt* s = sqlite3_next_stmt(db_, nullptr); s != nullptr;
       s = sqlite3_next_stmt(db_, s)) {
    if (std::find(statements_.begin(), statements_.end(), s) ==
        statements_.end()) {
      return true;
    }
  }
  return false;
}

Result<Record> DecodeSelectedRow(sqlite3_stmt* stmt, const RecordId& id,
                                 const std::string& path) {
  auto record =
      DecodeRecordWithColumns(id, ColumnBlob(stmt, 5),
                              {.state = sqlite3_column_int(stmt, 0),
                               .fingerprint = ColumnBlob(stmt, 1),
                               .token = ColumnBlob(stmt, 2),
                               .locked_until = sqlite3_column_int64(stmt, 3),
                               .expires_at = sqlite3_column_int64(stmt, 4)});
  if (!record) {
    return MakeError(ErrorCode::kDataLoss,
                     Prefix(path) + record.error().message());
  }
  return record;
}

}  // namespace idem::sqlite_internal
