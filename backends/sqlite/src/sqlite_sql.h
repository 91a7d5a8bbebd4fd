// The SQL text of the SQLite store: the schema it creates and the statements
// every connection prepares once and caches (sqlite_connection.h). The table
// and its columns are described in sqlite_schema.cc.

#ifndef IDEM_BACKENDS_SQLITE_SQLITE_SQL_H_
#define IDEM_BACKENDS_SQLITE_SQLITE_SQL_H_

namespace idem::sqlite_internal {

enum StatementId {
  kClaimUpsert,
  kSelect,
  kComplete,
  kRelease,
  kRevoke,
  kExtendLock,
  kStats,
  kPurge,
  kBegin,
  kCommit,
  kSavepoint,
  kSavepointRelease,
  kSavepointRollback,
  kStatementCount,
};

// Every table is named main.idem_records: an application transaction on the
// writer's connection (SqliteTransaction) could create a TEMP table of that
// name, which unqualified names would find first.
//
// Column names in SET and WHERE of the DO UPDATE refer to the existing row,
// `excluded.` to the one the INSERT proposed. `takeovers` counts the
// takeovers of the current claim's key since it was last claimed afresh, so
// RETURNING tells a takeover (> 0) from a new or expired record (0).
inline constexpr const char* kSql[kStatementCount] = {
    // kClaimUpsert: ?1 id, ?2 fingerprint, ?3 token, ?4 locked_until,
    // ?5 expires_at, ?6 record, ?7 now.
    "INSERT INTO main.idem_records (id, state, fingerprint, token, "
    "locked_until, "
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
    "FROM main.idem_records WHERE id = ?1",
    // kComplete: ?1 id, ?2 token, ?3 record, ?4 its locked_until (a
    // renewal since the claim may have moved the column, which must agree
    // with the record written: the record may come from the claim memo).
    "UPDATE main.idem_records SET state = 2, record = ?3, locked_until = ?4 "
    "WHERE id = ?1 AND token = ?2 AND state = 1",
    // kRelease: ?1 id, ?2 token.
    "DELETE FROM main.idem_records WHERE id = ?1 AND token = ?2 AND state = 1",
    // kRevoke: ?1 id.
    "DELETE FROM main.idem_records WHERE id = ?1",
    // kExtendLock: ?1 id, ?2 token, ?3 locked_until, ?4 record.
    "UPDATE main.idem_records SET locked_until = ?3, record = ?4 "
    "WHERE id = ?1 AND token = ?2 AND state = 1",
    // kStats: ?1 now. Rows of (expired, state, count).
    "SELECT expires_at <= ?1, state, count(*) FROM main.idem_records "
    "GROUP BY 1, 2",
    // kPurge: ?1 now, ?2 limit.
    "DELETE FROM main.idem_records WHERE id IN (SELECT id FROM "
    "main.idem_records "
    "WHERE expires_at <= ?1 LIMIT ?2)",
    // The writer's transactions, and one savepoint per call in them.
    "BEGIN IMMEDIATE",
    "COMMIT",
    "SAVEPOINT idem_call",
    "RELEASE idem_call",
    "ROLLBACK TO idem_call",
};

// Schema version 3 (sqlite_schema.cc).
inline constexpr const char* kCreateSchema[] = {
    "CREATE TABLE idem_records ("
    "seq INTEGER PRIMARY KEY, "
    "id BLOB UNIQUE NOT NULL, "
    "state INTEGER NOT NULL, "
    "fingerprint BLOB NOT NULL, "
    "token BLOB NOT NULL, "
    "locked_until INTEGER NOT NULL, "
    "expires_at INTEGER NOT NULL, "
    "takeovers INTEGER NOT NULL DEFAULT 0, "
    "record BLOB NOT NULL)",
    "CREATE INDEX idem_records_expires_at ON idem_records (expires_at)",
};

// Version 2's table (WITHOUT ROWID, keyed by id), moved aside, then copied
// into version 3's and dropped by the migration.
inline constexpr const char* kMoveAsideV2[] = {
    "ALTER TABLE idem_records RENAME TO idem_records_v2",
    "DROP INDEX idem_records_expires_at",
};
inline constexpr const char* kCopyV2[] = {
    "INSERT INTO idem_records (id, state, fingerprint, token, locked_until, "
    "expires_at, takeovers, record) SELECT id, state, fingerprint, token, "
    "locked_until, expires_at, takeovers, record FROM idem_records_v2",
    "DROP TABLE idem_records_v2",
};

// Version 1's table, read once by its migration.
inline constexpr const char* kSelectV1 = "SELECT id, record FROM idempotency";
inline constexpr const char* kInsertMigrated =
    "INSERT INTO idem_records (id, state, fingerprint, token, "
    "locked_until, expires_at, takeovers, record) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7)";
inline constexpr const char* kDropV1 = "DROP TABLE idempotency";

}  // namespace idem::sqlite_internal

#endif  // IDEM_BACKENDS_SQLITE_SQLITE_SQL_H_
