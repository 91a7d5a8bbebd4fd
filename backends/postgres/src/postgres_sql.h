// The SQL text of the PostgreSQL store: its prepared statements for one
// table, their parameter types, and the rule that makes a table name safe to
// splice into them.
//
// Why the claim has the shape it has: a claim of a free id is the plain
// INSERT ... ON CONFLICT DO NOTHING (kInsert), the cheapest write the
// database has for it, and a unique index serializes the inserts of one id,
// so of N concurrent claims of an absent id exactly one inserts. Only when a
// record stood in the way does the store read it (kSelect, a new statement
// and so a fresh READ COMMITTED snapshot that also sees a row a concurrent
// claim committed meanwhile) and, when it is claimable, take it over with
// the conditional upsert (kClaim), whose WHERE decides atomically, so two
// claims that both saw the record claimable cannot both take it over.
// First attempts, the bulk of the traffic, thus cost one round trip and the
// least server work. The alternatives cost every first attempt more: the
// conditional upsert first (its DO UPDATE projection, filter and RETURNING
// are set up on every execution, even when nothing conflicts), a claim that
// also SELECTs the row in the same statement (a CTE with UNION ALL), or an
// unconditional upsert returning the old values, which would turn every
// replay of a completed record into a write and a row lock, so that
// concurrent replays of one key would queue on each other.
//
// The purge deletes through the expires_at index with FOR UPDATE SKIP
// LOCKED: rows that a concurrent claim is taking over, or another
// instance's purge is deleting, are skipped, not waited for, so several
// instances sweeping one table never queue on each other.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_SQL_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_SQL_H_

#include <libpq-fe.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace idem::postgres_internal {

// Type OIDs of the parameters (pg_type.h; stable across versions).
inline constexpr Oid kBoolOid = 16;
inline constexpr Oid kByteaOid = 17;
inline constexpr Oid kInt8Oid = 20;
inline constexpr Oid kTextOid = 25;
inline constexpr Oid kByteaArrayOid = 1001;
inline constexpr Oid kInt8ArrayOid = 1016;

enum StatementId {
  kInsert,
  kClaim,
  kSelect,
  kComplete,
  kRelease,
  kRevoke,
  kExtendLock,
  kStats,
  kPurge,
  kInsertBatch,
  kSelectBatch,
  kCompleteBatch,
  kStatementCount,
};

struct StatementSpec {
  const char* name;
  std::vector<Oid> types;
  // Sent unprepared, so that the server plans it for each execution with
  // the values it gets: the batches' SELECT and UPDATE join an array with
  // the table, and a plan cached while the table was small (a sequential
  // scan or a hash join) would stay in use as it grows. Planning costs a
  // batch tens of microseconds; a scan of the table costs it milliseconds.
  // The batch INSERT is prepared: it reads the table only through the
  // conflict check on the primary key, whatever its size.
  bool plan_each_time = false;
};

// The most parameters a statement has (the claim's).
inline constexpr std::size_t kMaxParams = 7;

inline const StatementSpec& Spec(StatementId id) {
  static const StatementSpec kSpecs[kStatementCount] = {
      {"idem_insert",
       {kByteaOid, kByteaOid, kByteaOid, kInt8Oid, kInt8Oid, kByteaOid}},
      {"idem_claim",
       {kByteaOid, kByteaOid, kByteaOid, kInt8Oid, kInt8Oid, kByteaOid,
        kInt8Oid}},
      {"idem_select", {kByteaOid}},
      {"idem_complete", {kByteaOid, kByteaOid, kByteaOid, kInt8Oid}},
      {"idem_release", {kByteaOid, kByteaOid}},
      {"idem_revoke", {kByteaOid}},
      {"idem_extend_lock",
       {kByteaOid, kByteaOid, kInt8Oid, kByteaOid, kInt8Oid, kInt8Oid}},
      {"idem_stats", {kInt8Oid}},
      {"idem_purge", {kInt8Oid, kInt8Oid}},
      {"idem_insert_batch",
       {kByteaArrayOid, kByteaArrayOid, kByteaArrayOid, kInt8ArrayOid,
        kInt8ArrayOid, kByteaArrayOid}},
      {"idem_select_batch", {kByteaArrayOid}, true},
      {"idem_complete_batch",
       {kByteaArrayOid, kByteaArrayOid, kByteaArrayOid, kInt8ArrayOid},
       true},
  };
  return kSpecs[id];
}

using StatementTexts = std::array<std::string, kStatementCount>;

// The statements for one table; `t` is its quoted name qualified with its
// quoted schema ("schema"."table", found at Open), so that no search_path
// or TEMP table of a session can redirect them. In DO UPDATE,
// `r.` is the existing row and `excluded.` the one the INSERT proposed.
inline StatementTexts BuildSql(const std::string& t) {
  StatementTexts sql;
  // $1 id, $2 fingerprint, $3 token, $4 locked_until, $5 expires_at,
  // $6 record. "INSERT 0 1" when the id was free.
  sql[kInsert] = "INSERT INTO " + t +
                 " (id, state, fingerprint, token, locked_until, expires_at, "
                 "takeover, record) VALUES ($1, 1, $2, $3, $4, $5, false, $6) "
                 "ON CONFLICT (id) DO NOTHING";
  // The same and $7 now. One row (takeover) when the claim is acquired,
  // none when the record stood in the way after all.
  sql[kClaim] =
      "INSERT INTO " + t +
      " AS r (id, state, fingerprint, token, locked_until, expires_at, "
      "takeover, record) VALUES ($1, 1, $2, $3, $4, $5, false, $6) "
      "ON CONFLICT (id) DO UPDATE SET state = 1, "
      "fingerprint = excluded.fingerprint, token = excluded.token, "
      "locked_until = excluded.locked_until, "
      "expires_at = excluded.expires_at, takeover = r.expires_at > $7, "
      "record = excluded.record "
      "WHERE r.expires_at <= $7 OR (r.state = 1 AND "
      "r.fingerprint = excluded.fingerprint AND r.locked_until <= $7) "
      "RETURNING r.takeover";
  // $1 id.
  sql[kSelect] =
      "SELECT state, fingerprint, token, locked_until, expires_at, record "
      "FROM " +
      t + " WHERE id = $1";
  // $1 id, $2 token, $3 record, $4 its locked_until: a renewal between the
  // caller's read (or its claim) and this UPDATE may have moved the
  // column, which must agree with the record written.
  sql[kComplete] = "UPDATE " + t +
                   " SET state = 2, record = $3, locked_until = $4 "
                   "WHERE id = $1 AND token = $2 AND state = 1";
  // $1 id, $2 token.
  sql[kRelease] =
      "DELETE FROM " + t + " WHERE id = $1 AND token = $2 AND state = 1";
  // $1 id.
  sql[kRevoke] = "DELETE FROM " + t + " WHERE id = $1";
  // $1 id, $2 token, $3 new locked_until, $4 record, $5 now, $6 the
  // locked_until the caller read: the row it read is still there (a token
  // is new for every claim), only its lock may have moved since. One row
  // affected when renewed.
  sql[kExtendLock] = "UPDATE " + t +
                     " SET locked_until = $3, record = $4 "
                     "WHERE id = $1 AND token = $2 AND state = 1 AND "
                     "expires_at > $5 AND locked_until = $6";
  // $1 now. Rows of (expired, state, count).
  sql[kStats] =
      "SELECT expires_at <= $1, state, count(*) FROM " + t + " GROUP BY 1, 2";
  // $1 now, $2 limit.
  sql[kPurge] = "DELETE FROM " + t + " WHERE id IN (SELECT id FROM " + t +
                " WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)";
  // The asynchronous calls' batches (postgres_async_calls.h), one
  // statement for many calls; each parameter is an array with one element
  // per call, in the same order.
  // kInsert for many ids: $1 ids (distinct, in ascending order, so that two
  // batches that insert some of the same ids wait for each other in one
  // order, never in a cycle), $2 fingerprints, $3 tokens, $4 locked_until,
  // $5 expires_at, $6 records. Rows: the ids inserted.
  sql[kInsertBatch] =
      "INSERT INTO " + t +
      " (id, state, fingerprint, token, locked_until, expires_at, takeover, "
      "record) SELECT u.id, 1, u.fingerprint, u.token, u.locked_until, "
      "u.expires_at, false, u.record FROM unnest($1, $2, $3, $4, $5, $6) AS "
      "u(id, fingerprint, token, locked_until, expires_at, record) "
      "ON CONFLICT (id) DO NOTHING RETURNING id";
  // kSelect for many ids: $1 ids. Rows: id, then kSelect's columns.
  sql[kSelectBatch] =
      "SELECT id, state, fingerprint, token, locked_until, expires_at, record "
      "FROM " +
      t + " WHERE id = ANY($1)";
  // kComplete for many records: $1 ids (distinct), $2 tokens, $3 records,
  // $4 their locked_until. Rows: the (1-based) positions completed.
  sql[kCompleteBatch] =
      "UPDATE " + t +
      " AS r SET state = 2, record = u.record, locked_until = u.locked_until "
      "FROM unnest($1, $2, $3, $4) WITH ORDINALITY AS "
      "u(id, token, record, locked_until, n) "
      "WHERE r.id = u.id AND r.token = u.token AND r.state = 1 "
      "RETURNING u.n";
  return sql;
}

// At most 48 bytes, so that the index name's suffix stays within
// PostgreSQL's 63.
inline constexpr std::size_t kMaxTableName = 48;

// Letters, digits and '_', not starting with a digit, at most kMaxTableName
// bytes.
inline bool ValidTableName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTableName) return false;
  auto letter = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (!letter(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) {
    return letter(c) || (c >= '0' && c <= '9');
  });
}

// `identifier` in double quotes (case-sensitive). ValidTableName admits no
// quote characters, so no escaping is needed.
inline std::string Quote(std::string_view identifier) {
  // Appended piecewise: GCC 12 at -O3 warns falsely (-Wrestrict) about
  // "\"" + std::string.
  std::string quoted;
  quoted.reserve(identifier.size() + 2);
  quoted += '"';
  quoted += identifier;
  quoted += '"';
  return quoted;
}

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_SQL_H_
