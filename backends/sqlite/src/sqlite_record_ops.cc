// The SQL of one record (sqlite_record_ops.h); sqlite_store.cc says why
// Claim and Complete are the statements they are.
#include "sqlite_record_ops.h"

#include <string>

#include "idem/sqlite_store.h"
#include "idem/store/record_codec.h"

namespace idem::sqlite_internal {

Result<std::optional<Record>> SelectRecord(Connection& conn,
                                           const RecordId& id) {
  IDEM_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, conn.Prepared(kSelect, "select"));
  StatementScope scope(stmt);
  BindBlob(stmt, 1, id.view());
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE) return std::optional<Record>();
  if (rc != SQLITE_ROW) return tl::unexpected(conn.SqlError("select", rc));
  IDEM_ASSIGN_OR_RETURN(Record record,
                        DecodeSelectedRow(stmt, id, conn.options().path));
  return std::optional<Record>(std::move(record));
}

Result<ClaimResult> ClaimOn(Connection& conn, ClaimMemo& claims,
                            const ClaimAttemptHook& hook, int attempts,
                            const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) {
  const Record fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
  const std::string blob = EncodeRecord(fresh);
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (hook) hook(ClaimAttemptPoint::kBeforeWrite, attempt);
    {
      IDEM_ASSIGN_OR_RETURN(sqlite3_stmt * stmt,
                            conn.Prepared(kClaimUpsert, "claim"));
      StatementScope scope(stmt);
      BindBlob(stmt, 1, id.view());
      BindBlob(stmt, 2, fp.view());
      BindBlob(stmt, 3, fresh.token.view());
      sqlite3_bind_int64(stmt, 4, ToUnixNanos(fresh.locked_until));
      sqlite3_bind_int64(stmt, 5, ToUnixNanos(fresh.expires_at));
      BindBlob(stmt, 6, blob);
      sqlite3_bind_int64(stmt, 7, ToUnixNanos(now));
      const int rc = sqlite3_step(stmt);
      if (rc == SQLITE_ROW) {
        const bool takeover = sqlite3_column_int64(stmt, 0) > 0;
        // Step to the end: in autocommit mode the transaction commits
        // there, and a commit can still fail (I/O).
        IDEM_RETURN_IF_ERROR(conn.StepDone(stmt, "claim"));
        claims.Remember(fresh.token,
                        {id, fp, fresh.locked_until, fresh.expires_at});
        return ClaimAcquired(fresh, takeover);
      }
      if (rc != SQLITE_DONE) return tl::unexpected(conn.SqlError("claim", rc));
    }
    // A live record stood in the way: read it for the outcome. If it went
    // away in between (another process released, revoked or purged it; in
    // a batch's transaction nothing can) or became claimable, try again.
    if (hook) hook(ClaimAttemptPoint::kBeforeRead, attempt);
    IDEM_ASSIGN_OR_RETURN(std::optional<Record> existing,
                          SelectRecord(conn, id));
    if (!existing.has_value()) continue;
    if (auto blocked = ClaimBlockedBy(*existing, fp, now)) return *blocked;
  }
  // Lost every race (store.h): in progress elsewhere, retry later.
  ClaimResult busy;
  busy.outcome = ClaimOutcome::kInProgress;
  busy.locked_until = now;
  return busy;
}

namespace {

// The record of the claim of `token` on `id` as its Complete writes it:
// from the memo when this store made the claim and remembers it, else read
// in the caller's transaction (nullopt when the claim is not held).
Result<std::optional<Record>> HeldRecord(Connection& conn, ClaimMemo& claims,
                                         const RecordId& id,
                                         const Token& token) {
  if (std::optional<Record> remembered = claims.RecallRecord(id, token)) {
    return remembered;
  }
  IDEM_ASSIGN_OR_RETURN(std::optional<Record> record, SelectRecord(conn, id));
  if (!record.has_value() || !record->HeldBy(token)) return std::nullopt;
  return record;
}

}  // namespace

Result<bool> CompleteOn(Connection& conn, ClaimMemo& claims, const RecordId& id,
                        const Token& token, const Response& response) {
  IDEM_ASSIGN_OR_RETURN(std::optional<Record> record,
                        HeldRecord(conn, claims, id, token));
  if (!record.has_value()) return false;
  const std::string blob = EncodeCompleted(*record, response);
  IDEM_ASSIGN_OR_RETURN(
      int changed, Change(conn, kComplete, "complete", [&](sqlite3_stmt* stmt) {
        BindBlob(stmt, 1, id.view());
        BindBlob(stmt, 2, token.view());
        BindBlob(stmt, 3, blob);
        sqlite3_bind_int64(stmt, 4, ToUnixNanos(record->locked_until));
      }));
  // The token is new for every claim: if the row still has it, and is still
  // in progress, it holds the fields of the record written.
  return changed == 1;
}

}  // namespace idem::sqlite_internal
