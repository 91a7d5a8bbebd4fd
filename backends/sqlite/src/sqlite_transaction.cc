// Completing a record in the application's own transaction
// (SqliteStore::CompleteInTransaction) and SqliteTransaction, on the
// application's connection or on the store's writer.
//
// The completion is the UPDATE ... WHERE id = ? AND token = ? AND state = 1
// Complete runs on the store's writer (with the row's SELECT first unless
// the store remembers the claim), inside the caller's transaction: the
// fencing token is checked by the UPDATE, so a takeover committed before it
// makes the UPDATE change nothing (kClaimLost), and one that comes later
// waits for the caller's write lock (or, on the writer, for the writer) and
// then finds the record completed. On the writer it is the store's own
// statement (sqlite_store.cc); here is the one on the application's
// connection.
//
// Only the main database of the connection is accepted, and the table is
// named main.idem_records: SQLite commits an ATTACHed database atomically
// with the main one only in rollback-journal mode, never in WAL mode, which
// the store uses; a TEMP table of the same name cannot stand in either.

#include "idem/sqlite_transaction.h"

#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "idem/clock.h"
#include "idem/store/record_codec.h"
#include "sqlite_connection.h"

namespace idem {
namespace {

using sqlite_internal::BindBlob;
using sqlite_internal::Prefix;

constexpr const char* kSelectInTransaction =
    "SELECT state, fingerprint, token, locked_until, expires_at, record "
    "FROM main.idem_records WHERE id = ?1";
constexpr const char* kCompleteInTransaction =
    "UPDATE main.idem_records SET state = 2, record = ?3, locked_until = ?4 "
    "WHERE id = ?1 AND token = ?2 AND state = 1";

// A statement prepared on the caller's connection, finalized with its scope.
class Statement {
 public:
  ~Statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt*& out() { return stmt_; }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

class Completion {
 public:
  Completion(const std::string& path, sqlite3* db) : db_(db) {
    options_.path = path;
  }

  Error SqlError(const char* op, int rc) const {
    return sqlite_internal::SqlError(options_, op, db_, rc);
  }

  Status CheckConnection() const {
    if (db_ == nullptr) {
      return MakeError(ErrorCode::kInvalidArgument,
                       Prefix(options_.path) +
                           "complete in transaction: no connection given");
    }
    if (sqlite3_get_autocommit(db_) != 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       Prefix(options_.path) +
                           "complete in transaction: the connection has no "
                           "transaction open (BEGIN IMMEDIATE first)");
    }
    const char* file = sqlite3_db_filename(db_, "main");
    if (file == nullptr || *file == '\0' || !SameFile(file)) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          Prefix(options_.path) +
              "complete in transaction: the connection's main database is '" +
              std::string(file == nullptr ? "" : file) +
              "', not the store's file; the record must be written in the "
              "same file as the business rows (an ATTACHed database is not "
              "atomic with the main one in WAL mode)");
    }
    return {};
  }

  // SQLite names the main database by its absolute path: a store opened
  // by that same path needs no stat() of both files on every completion.
  bool SameFile(const char* file) const {
    if (options_.path == file) return true;
    std::error_code ec;
    return std::filesystem::equivalent(file, options_.path, ec);
  }

  // `record`: the claim's record when the store remembers it, else read
  // here.
  Result<TransactionCompletion> Run(const RecordId& id, const Token& token,
                                    const Response& stored,
                                    std::optional<Record> record) {
    IDEM_RETURN_IF_ERROR(CheckConnection());
    if (!record.has_value()) {
      IDEM_ASSIGN_OR_RETURN(record, Select(id));
      if (!record.has_value() || !record->HeldBy(token)) {
        return TransactionCompletion::kClaimLost;
      }
    }
    const std::string blob = EncodeCompleted(*record, stored);
    Statement update;
    int rc = sqlite3_prepare_v2(db_, kCompleteInTransaction, -1, &update.out(),
                                nullptr);
    if (rc != SQLITE_OK) return tl::unexpected(SqlError("complete", rc));
    BindBlob(update.get(), 1, id.view());
    BindBlob(update.get(), 2, token.view());
    BindBlob(update.get(), 3, blob);
    sqlite3_bind_int64(update.get(), 4, ToUnixNanos(record->locked_until));
    rc = sqlite3_step(update.get());
    if (rc != SQLITE_DONE) return tl::unexpected(SqlError("complete", rc));
    return sqlite3_changes(db_) == 1 ? TransactionCompletion::kStored
                                     : TransactionCompletion::kClaimLost;
  }

 private:
  Result<std::optional<Record>> Select(const RecordId& id) {
    Statement select;
    int rc = sqlite3_prepare_v2(db_, kSelectInTransaction, -1, &select.out(),
                                nullptr);
    if (rc != SQLITE_OK) return tl::unexpected(SqlError("complete", rc));
    sqlite3_stmt* stmt = select.get();
    BindBlob(stmt, 1, id.view());
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) return std::optional<Record>();
    if (rc != SQLITE_ROW) return tl::unexpected(SqlError("complete", rc));
    IDEM_ASSIGN_OR_RETURN(Record record, sqlite_internal::DecodeSelectedRow(
                                             stmt, id, options_.path));
    return std::optional<Record>(std::move(record));
  }

  SqliteStoreOptions options_;
  sqlite3* const db_;
};

Status Exec(const std::string& path, sqlite3* db, const char* sql,
            const char* op) {
  if (db == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     Prefix(path) + op + ": no connection given");
  }
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc == SQLITE_OK) return {};
  SqliteStoreOptions options;
  options.path = path;
  Error e = sqlite_internal::SqlError(options, op, db, rc);
  // "cannot start a transaction within a transaction" is the caller's.
  if (rc == SQLITE_ERROR && sqlite3_get_autocommit(db) == 0) {
    return MakeError(ErrorCode::kInvalidArgument, e.message());
  }
  return tl::unexpected(std::move(e));
}

tl::unexpected<Error> NotOpen(const std::string& path, const char* op) {
  return MakeError(
      ErrorCode::kInvalidArgument,
      Prefix(path) + op + ": this transaction is not open (Begin first)");
}

}  // namespace

Result<TransactionCompletion> SqliteStore::CompleteInTransaction(
    sqlite3* db, const RecordId& id, const Token& token,
    const Response& stored) {
  constexpr std::string_view kOp = "complete in transaction";
  // The writer's connection, held by this thread's transaction: the store's
  // own statements, and no file to check.
  if (HoldsWriterOn(db)) {
    return Call(kOp, [&] { return CompleteOnHeldWriter(id, token, stored); });
  }
  return Call(kOp, [&] {
    return Completion(path(), db)
        .Run(id, token, stored, RememberedClaim(id, token));
  });
}

Status SqliteTransaction::Begin() {
  if (!on_writer_) return Exec(store_.path(), db_, "BEGIN IMMEDIATE", "begin");
  if (db_ != nullptr) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        Prefix(store_.path()) + "begin: this transaction is already open");
  }
  IDEM_ASSIGN_OR_RETURN(db_, store_.HoldWriter());
  return {};
}

Status SqliteTransaction::Commit() {
  if (!on_writer_) return Exec(store_.path(), db_, "COMMIT", "commit");
  if (db_ == nullptr) return NotOpen(store_.path(), "commit");
  db_ = nullptr;
  return store_.ReleaseWriter(/*commit=*/true);
}

void SqliteTransaction::Rollback() {
  if (on_writer_) {
    if (db_ == nullptr) return;
    db_ = nullptr;
    (void)store_.ReleaseWriter(/*commit=*/false);
    return;
  }
  if (db_ != nullptr && sqlite3_get_autocommit(db_) == 0) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

Result<TransactionCompletion> SqliteTransaction::Complete(
    const ClaimHandle& claim, const Response& stored) {
  if (on_writer_ && db_ == nullptr) {
    return NotOpen(store_.path(), "complete in transaction");
  }
  return store_.CompleteInTransaction(db_, claim.record_id(), claim.token(),
                                      stored);
}

}  // namespace idem
