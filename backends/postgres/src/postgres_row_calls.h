// The PostgreSQL store's statements that need nothing of the store but a
// connection: reading a record's row, claiming, renewing its lock, counting
// and purging. postgres_store.cc keeps what is the store's (the pool, the claim
// memo, the connections lent to transactions) and runs these on a pooled
// connection. `prefix` begins every error message (the store's name and
// table).
//
// Thread-safety: as the Connection, one thread at a time.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_ROW_CALLS_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_ROW_CALLS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "idem/error.h"
#include "idem/internal/claim_attempt_hook.h"
#include "idem/store.h"
#include "idem/types.h"
#include "postgres_binary.h"
#include "postgres_connection.h"

namespace idem::postgres_internal {

// The number of rows a statement affected ("1" for "INSERT 0 1").
std::size_t Affected(const PgResult& r);

// The record of `id` in row `row` of `r`, whose six columns from `first` on are
// state, fingerprint, token, locked_until, expires_at and record (binary
// format), checked against them. Errors: kDataLoss for a NULL column or a
// record its columns disagree with.
Result<Record> RecordOfRow(const PGresult* r, int row, int first,
                           const std::string& prefix, const RecordId& id);

// The row of `id`, if any: its record, checked against its columns
// (state, fingerprint, token, locked_until, expires_at, record). Errors:
// kDataLoss for a NULL column or a record its columns disagree with; the
// connection's (Connection::Run). `op` names the call in errors.
Result<std::optional<Record>> SelectRecord(Connection& c,
                                           const std::string& prefix,
                                           const RecordId& id,
                                           std::string_view op);

// Store::Claim's statements for the claim record `fresh`
// (NewClaimRecord's), as postgres_store.cc's file comment describes: an
// INSERT, then for a record in the way a SELECT and ClaimBlockedBy, and a
// conditional upsert to take it over; a race lost starts again, at most
// PostgresStore::kClaimAttempts times, then kInProgress. `hook` (empty but
// in tests) runs at each ClaimAttemptPoint. kAcquired means `fresh` was
// written.
Result<ClaimResult> ClaimOn(Connection& c, const std::string& prefix,
                            const RecordId& id, const Record& fresh,
                            TimePoint now, const ClaimAttemptHook& hook);

// Store::Complete's statements: the UPDATE that writes the completed record
// if `token` still holds the row in progress. `held` is the claim's record
// when the store remembers it (ClaimMemo::RecallRecord); without it the row
// is read first (a SELECT) and nothing is written unless `token` holds it.
Result<bool> CompleteOn(Connection& c, const std::string& prefix,
                        const RecordId& id, const Token& token,
                        const Response& response, std::optional<Record> held,
                        std::string_view op);

// Store::ExtendLock: a SELECT, then the UPDATE that writes the renewed
// record if the row still holds what was read. Only a renewal of the same
// claim on another connection can change the row and keep it held; then it
// reads again, up to PostgresStore::kClaimAttempts times (then
// kUnavailable).
Result<bool> ExtendLockOn(Connection& c, const std::string& prefix,
                          const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout);

// Store::Stats: the rows counted by state and expiry in one statement.
Result<std::optional<StoreStats>> StatsOn(Connection& c, TimePoint now);

// Store::PurgeExpired: batches of PostgresStore::kPurgeBatch rows, each its
// own statement, so that no purge holds many row locks for long.
Result<std::size_t> PurgeExpiredOn(Connection& c, TimePoint now,
                                   std::size_t limit);

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_ROW_CALLS_H_
