// Records live in one table of one database file, in WAL mode
// (sqlite_sql.h has the DDL):
//
//   idem_records (
//     seq          INTEGER PRIMARY KEY,        -- the rowid: insertion order
//     id           BLOB UNIQUE NOT NULL,       -- the 32-byte record id
//     state        INTEGER NOT NULL,           -- 1 in_progress, 2 completed
//     fingerprint  BLOB NOT NULL,              -- 32 bytes
//     token        BLOB NOT NULL,              -- 16 bytes
//     locked_until INTEGER NOT NULL,           -- ns since the Unix epoch
//     expires_at   INTEGER NOT NULL,           -- ns since the Unix epoch
//     takeovers    INTEGER NOT NULL DEFAULT 0, -- of this claim's lock
//     record       BLOB NOT NULL               -- EncodeRecord(the record)
//   ), with an index on expires_at (and the UNIQUE one on id).
//
// Why rows in insertion order, not keyed by id (version 2): ids are random,
// so each claim inserted its row, and each completion rewrote it, in a
// random leaf of the table's B-tree, where rows with their records fill a
// 4 KiB page with about ten: every commit wrote several such pages to the
// WAL (4.3 frames per request), and the checkpoints copied them again. With
// the rowid, new rows go to the table's last pages, which a commit's claims
// share and its completions (of rows claimed moments ago) find there too;
// only the index on id, about 90 entries a page, takes a random leaf per
// claim. Measured over HTTP: 16,806 against 12,390 fresh-key requests/s
// (benchmarks/http/NOTES.md, "SQLite's rows in insertion order").
//
// The columns are what SQL needs to decide a claim, a completion and a purge
// in the database; `record` is the whole record in the record codec's layout
// (record_codec.h), checksummed, and is what every read returns, checked
// against the columns (DecodeRecordWithColumns). `takeovers` counts how often
// the current claim's lock was taken over since the key was last claimed
// afresh: it is how the claim statement's RETURNING tells a takeover from a
// new claim. No client key, scope or request body is ever written.
//
// Schema versions (PRAGMA user_version):
//   1: `idempotency (id BLOB PRIMARY KEY, record BLOB NOT NULL)`: the record
//      blob only. A claim had to read and decode it in a transaction, and
//      PurgeExpired had to decode every row.
//   2: the columns above, in a table WITHOUT ROWID keyed by id. Migrating
//      from 1 decodes each record into the columns; a record that does not
//      decode is carried over unchanged (never purged, still kDataLoss on
//      read) rather than dropped.
//   3: the layout above. Migrating from 2 copies every row as it is; from
//      1, as to 2.
// A file with a newer version than this build knows is refused.

#include "sqlite_schema.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>

#include "idem/clock.h"
#include "idem/record.h"
#include "idem/sqlite_store.h"
#include "idem/store/record_codec.h"
#include "sqlite_sql.h"

namespace idem::sqlite_internal {
namespace {

constexpr int kSchemaVersion = SqliteStore::kSchemaVersion;

// One PRAGMA journal_mode = WAL: SQLITE_DONE with the mode it left, or the
// error code.
int TrySwitchToWal(Connection& conn, std::string& mode) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(conn.db(), "PRAGMA journal_mode = WAL", -1, &stmt,
                              nullptr);
  if (rc != SQLITE_OK) return rc;
  rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    const unsigned char* text = sqlite3_column_text(stmt, 0);
    if (text != nullptr) mode = reinterpret_cast<const char*>(text);
    rc = sqlite3_step(stmt);
  }
  sqlite3_finalize(stmt);
  return rc;
}

// Processes that open a new file at once all switch it to WAL, in rollback
// journal mode, where SQLite answers SQLITE_BUSY without calling the busy
// handler when waiting could deadlock (a reader that wants the write lock
// another holds): the PRAGMA is tried again, with pauses of 1 ms doubling up
// to 50 ms, until busy_timeout has passed. Without it, one of four processes
// starting together on a new file failed about one start in twenty.
Status SwitchToWal(Connection& conn) {
  const auto deadline =
      std::chrono::steady_clock::now() + conn.options().busy_timeout;
  auto pause = std::chrono::milliseconds(1);
  std::string mode;
  int rc = TrySwitchToWal(conn, mode);
  while ((rc & 0xFF) == SQLITE_BUSY &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
    mode.clear();
    rc = TrySwitchToWal(conn, mode);
  }
  if (rc != SQLITE_DONE) {
    return tl::unexpected(conn.SqlError("journal_mode", rc));
  }
  if (mode != "wal") {
    return MakeError(ErrorCode::kUnavailable,
                     Prefix(conn.options().path) +
                         "cannot switch to WAL mode (got '" + mode +
                         "'; is the file on a local file system?)");
  }
  return {};
}

template <std::size_t N>
Status ExecAll(Connection& conn, const char* const (&statements)[N],
               std::string_view op) {
  for (const char* sql : statements) {
    IDEM_RETURN_IF_ERROR(conn.Exec(sql, op));
  }
  return {};
}

Status CreateSchema(Connection& conn, std::string_view op) {
  return ExecAll(conn, kCreateSchema, op);
}

// v2 -> v3: the same rows, moved into a table with a rowid.
Status MigrateV2(Connection& conn) {
  constexpr std::string_view kOp = "migrate v2 to v3";
  IDEM_RETURN_IF_ERROR(ExecAll(conn, kMoveAsideV2, kOp));
  IDEM_RETURN_IF_ERROR(CreateSchema(conn, kOp));
  return ExecAll(conn, kCopyV2, kOp);
}

// v1 -> the current version: the columns are decoded from each record. A
// record that does not decode keeps its bytes with columns that never match
// a claim's conditions or the purge (state 0, expires_at = max), so it
// stays kDataLoss on read instead of disappearing.
Status MigrateV1(Connection& conn) {
  constexpr std::string_view kOp = "migrate v1";
  IDEM_RETURN_IF_ERROR(CreateSchema(conn, kOp));
  sqlite3_stmt* read = nullptr;
  sqlite3_stmt* write = nullptr;
  int rc = sqlite3_prepare_v2(conn.db(), kSelectV1, -1, &read, nullptr);
  if (rc == SQLITE_OK) {
    rc = sqlite3_prepare_v2(conn.db(), kInsertMigrated, -1, &write, nullptr);
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
    sqlite3_bind_int64(write, 5, ToUnixNanos(columns.locked_until));
    sqlite3_bind_int64(write, 6, ToUnixNanos(columns.expires_at));
    BindBlob(write, 7, blob);
    rc = sqlite3_step(write);
    sqlite3_reset(write);
    sqlite3_clear_bindings(write);
    if (rc != SQLITE_DONE) break;
  }
  sqlite3_finalize(read);
  sqlite3_finalize(write);
  if (rc != SQLITE_DONE) return tl::unexpected(conn.SqlError(kOp, rc));
  return conn.Exec(kDropV1, kOp);
}

// SqliteStoreOptions::create = false: reads only, before anything could
// write (the switch to WAL rewrites the file's header), so that an empty
// file or another application's database is left as it was.
Status CheckExisting(Connection& conn) {
  constexpr std::string_view kOp = "check schema";
  IDEM_ASSIGN_OR_RETURN(const std::int64_t version,
                        conn.QueryInt("PRAGMA user_version", kOp));
  IDEM_ASSIGN_OR_RETURN(
      const std::int64_t tables,
      conn.QueryInt("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                    "AND name IN ('idem_records', 'idempotency')",
                    kOp));
  auto missing = [&](const std::string& what) {
    return MakeError(ErrorCode::kUnavailable,
                     Prefix(conn.options().path) + what +
                         " (create=false: nothing is created or migrated)");
  };
  if (tables == 0) {
    return missing("holds no idem store: no table idem_records (user_version " +
                   std::to_string(version) +
                   "; an empty file or another application's database?)");
  }
  if (version > kSchemaVersion) return {};  // PrepareSchema refuses it.
  if (version < kSchemaVersion) {
    return missing("is an idem store of schema version " +
                   std::to_string(version) + " that needs migrating to " +
                   std::to_string(kSchemaVersion) +
                   "; open it once with the application");
  }
  return {};
}

}  // namespace

Status PrepareSchema(Connection& conn) {
  const std::string& path = conn.options().path;
  if (!conn.options().create) IDEM_RETURN_IF_ERROR(CheckExisting(conn));
  IDEM_RETURN_IF_ERROR(SwitchToWal(conn));
  IDEM_RETURN_IF_ERROR(conn.Exec("BEGIN IMMEDIATE", "schema"));
  IDEM_ASSIGN_OR_RETURN(const std::int64_t version,
                        conn.QueryInt("PRAGMA user_version", "schema"));
  if (version > kSchemaVersion) {
    return MakeError(ErrorCode::kInvalidArgument,
                     Prefix(path) + "schema version " +
                         std::to_string(version) +
                         " is newer than this build of idem knows (" +
                         std::to_string(kSchemaVersion) + ")");
  }
  if (version < kSchemaVersion) {
    if (version == 1) {
      IDEM_RETURN_IF_ERROR(MigrateV1(conn));
    } else if (version == 2) {
      IDEM_RETURN_IF_ERROR(MigrateV2(conn));
    } else if (version == 0) {
      IDEM_RETURN_IF_ERROR(CreateSchema(conn, "create schema"));
    } else {
      return MakeError(
          ErrorCode::kInvalidArgument,
          Prefix(path) + "unknown schema version " + std::to_string(version));
    }
    const std::string set_version =
        "PRAGMA user_version = " + std::to_string(kSchemaVersion);
    IDEM_RETURN_IF_ERROR(conn.Exec(set_version.c_str(), "schema"));
  }
  return conn.Exec("COMMIT", "schema");
}

}  // namespace idem::sqlite_internal
