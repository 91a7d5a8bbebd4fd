// The SQL of one record on a connection, for the SQLite store's writer
// calls and its completion inside an application transaction: Claim as one
// upsert (and a SELECT when a live record stood in the way), Complete as one
// conditional UPDATE, the SELECT of a row, and any other cached statement run
// to its end. sqlite_store.cc says why each is the statement it is.
//
// Failure: SQLite's errors as the connection reports them (kUnavailable for
// I/O and busy errors, kInternal for the rest; sqlite_connection.h), a row
// that does not decode as kInternal naming the file.
//
// Thread-safety: each call uses `conn` alone, which the caller owns for the
// call (the writer's thread, or the holder of the writer); `claims` is
// thread-safe.

#ifndef IDEM_BACKENDS_SQLITE_SQLITE_RECORD_OPS_H_
#define IDEM_BACKENDS_SQLITE_SQLITE_RECORD_OPS_H_

#include <sqlite3.h>

#include <optional>
#include <string_view>
#include <utility>

#include "idem/error.h"
#include "idem/internal/claim_attempt_hook.h"
#include "idem/record.h"
#include "idem/store.h"
#include "idem/store/claim_memo.h"
#include "sqlite_connection.h"
#include "sqlite_sql.h"

namespace idem::sqlite_internal {

// The row of `id` (nullopt when absent), decoded and checked against its
// columns.
Result<std::optional<Record>> SelectRecord(Connection& conn,
                                           const RecordId& id);

// Runs the cached statement `id` with `bind`'s bindings to its end; the rows
// it changed.
template <typename Bind>
Result<int> Change(Connection& conn, StatementId id, std::string_view op,
                   Bind&& bind) {
  IDEM_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, conn.Prepared(id, op));
  StatementScope scope(stmt);
  std::forward<Bind>(bind)(stmt);
  IDEM_RETURN_IF_ERROR(conn.StepDone(stmt, op));
  return conn.changes();
}

// Store::Claim on `conn` (autocommit, or a writer's batch transaction):
// remembers an acquired claim in `claims`. Calls `hook` (may be empty) at
// each ClaimAttemptPoint; after `attempts` lost races answers kInProgress
// (store.h).
Result<ClaimResult> ClaimOn(Connection& conn, ClaimMemo& claims,
                            const ClaimAttemptHook& hook, int attempts,
                            const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl, Duration lock_timeout);

// Completes the claim of `token` in the transaction open on `conn`; false
// when it is not held (nothing written). Reads the row first only when
// `claims` does not remember the claim. Does not forget it: the caller does
// once the completion can no longer roll back.
Result<bool> CompleteOn(Connection& conn, ClaimMemo& claims, const RecordId& id,
                        const Token& token, const Response& response);

}  // namespace idem::sqlite_internal

#endif  // IDEM_BACKENDS_SQLITE_SQLITE_RECORD_OPS_H_
