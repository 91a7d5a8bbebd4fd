#include "postgres_row_calls.h"

#include <libpq-fe.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <utility>

#include "idem/postgres_store.h"
#include "idem/store/record_codec.h"

namespace idem::postgres_internal {

std::size_t Affected(const PgResult& r) {
  return static_cast<std::size_t>(
      std::strtoull(PQcmdTuples(r.get()), nullptr, 10));
}

Result<Record> RecordOfRow(const PGresult* r, int row, int first,
                           const std::string& prefix, const RecordId& id) {
  for (int col = first; col < first + 6; ++col) {
    if (PQgetisnull(r, row, col)) {
      return MakeError(ErrorCode::kDataLoss,
                       prefix + "record " + id.ToHex() + " has a NULL column");
    }
  }
  auto record =
      DecodeRecordWithColumns(id, Cell(r, row, first + 5),
                              {.state = IntCell(r, row, first),
                               .fingerprint = Cell(r, row, first + 1),
                               .token = Cell(r, row, first + 2),
                               .locked_until = IntCell(r, row, first + 3),
                               .expires_at = IntCell(r, row, first + 4)});
  if (!record) {
    return MakeError(record.error().code(), prefix + record.error().message());
  }
  return record;
}

Result<std::optional<Record>> SelectRecord(Connection& c,
                                           const std::string& prefix,
                                           const RecordId& id,
                                           std::string_view op) {
  IDEM_ASSIGN_OR_RETURN(const PgResult r, c.Run(kSelect, {id.view()}, op));
  if (PQntuples(r.get()) == 0) return std::optional<Record>();
  IDEM_ASSIGN_OR_RETURN(Record record, RecordOfRow(r.get(), 0, 0, prefix, id));
  return std::optional<Record>(std::move(record));
}

Result<ClaimResult> ClaimOn(Connection& c, const std::string& prefix,
                            const RecordId& id, const Record& fresh,
                            TimePoint now, const ClaimAttemptHook& hook) {
  const std::string blob = EncodeRecord(fresh);
  const auto locked_until = BigEndian64(ToUnixNanos(fresh.locked_until));
  const auto expires_at = BigEndian64(ToUnixNanos(fresh.expires_at));
  const auto now_be = BigEndian64(ToUnixNanos(now));
  const std::array<std::string_view, 7> params = {
      id.view(),          fresh.fingerprint.view(), fresh.token.view(),
      View(locked_until), View(expires_at),         blob,
      View(now_be)};
  for (int attempt = 0; attempt < PostgresStore::kClaimAttempts; ++attempt) {
    if (hook) hook(ClaimAttemptPoint::kBeforeWrite, attempt);
    IDEM_ASSIGN_OR_RETURN(const PgResult inserted,
                          c.Run(kInsert, std::span(params).first(6), "claim"));
    if (Affected(inserted) == 1) return ClaimAcquired(fresh, false);
    // A record stood in the way. A new statement has a fresh snapshot, so
    // this also sees a row a concurrent claim committed after the insert
    // started.
    if (hook) hook(ClaimAttemptPoint::kBeforeRead, attempt);
    IDEM_ASSIGN_OR_RETURN(const auto row, SelectRecord(c, prefix, id, "claim"));
    if (!row.has_value()) continue;  // Gone (released, purged): again.
    if (auto blocked = ClaimBlockedBy(*row, fresh.fingerprint, now)) {
      return *blocked;
    }
    // Expired, or its lock timed out: take it over if it still is.
    IDEM_ASSIGN_OR_RETURN(const PgResult taken, c.Run(kClaim, params, "claim"));
    if (PQntuples(taken.get()) == 1) {
      return ClaimAcquired(
          fresh, Cell(taken.get(), 0, 0) == std::string_view("\x01", 1));
    }
    // Changed in between (completed, taken over by another claim): again.
  }
  // Lost every race (store.h): in progress elsewhere, retry later.
  ClaimResult busy;
  busy.outcome = ClaimOutcome::kInProgress;
  busy.locked_until = now;
  return busy;
}

Result<bool> CompleteOn(Connection& c, const std::string& prefix,
                        const RecordId& id, const Token& token,
                        const Response& response, std::optional<Record> held,
                        std::string_view op) {
  if (!held) {
    IDEM_ASSIGN_OR_RETURN(held, SelectRecord(c, prefix, id, op));
    if (!held.has_value() || !held->HeldBy(token)) return false;
  }
  const std::string blob = EncodeCompleted(*held, response);
  const auto locked_until = BigEndian64(ToUnixNanos(held->locked_until));
  IDEM_ASSIGN_OR_RETURN(
      const PgResult r,
      c.Run(kComplete, {id.view(), token.view(), blob, View(locked_until)},
            op));
  // The token is new for every claim: a row that still has it, in
  // progress, holds exactly the fields that claim wrote.
  return Affected(r) == 1;
}

Result<bool> ExtendLockOn(Connection& c, const std::string& prefix,
                          const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) {
  const auto now_be = BigEndian64(ToUnixNanos(now));
  for (int attempt = 0; attempt < PostgresStore::kClaimAttempts; ++attempt) {
    IDEM_ASSIGN_OR_RETURN(std::optional<Record> row,
                          SelectRecord(c, prefix, id, "extend lock"));
    if (!row.has_value()) return false;
    const std::optional<TimePoint> until =
        RenewedLockUntil(*row, token, now, lock_timeout);
    if (!until) return false;
    if (*until == row->locked_until) return true;
    const auto old_be = BigEndian64(ToUnixNanos(row->locked_until));
    const auto until_be = BigEndian64(ToUnixNanos(*until));
    row->locked_until = *until;
    const std::string blob = EncodeRecord(*row);
    const std::array<std::string_view, 6> params = {
        id.view(), token.view(), View(until_be),
        blob,      View(now_be), View(old_be)};
    IDEM_ASSIGN_OR_RETURN(const PgResult r,
                          c.Run(kExtendLock, params, "extend lock"));
    if (Affected(r) == 1) return true;
  }
  return MakeError(ErrorCode::kUnavailable,
                   prefix + "extend lock: the record changed under " +
                       std::to_string(PostgresStore::kClaimAttempts) +
                       " attempts in a row");
}

Result<std::optional<StoreStats>> StatsOn(Connection& c, TimePoint now) {
  const auto now_be = BigEndian64(ToUnixNanos(now));
  IDEM_ASSIGN_OR_RETURN(const PgResult r,
                        c.Run(kStats, {View(now_be)}, "stats"));
  StoreStats stats;
  for (int row = 0; row < PQntuples(r.get()); ++row) {
    stats.CountRows(IntCell(r.get(), row, 0) != 0, IntCell(r.get(), row, 1),
                    static_cast<std::uint64_t>(IntCell(r.get(), row, 2)));
  }
  return std::optional<StoreStats>(stats);
}

Result<std::size_t> PurgeExpiredOn(Connection& c, TimePoint now,
                                   std::size_t limit) {
  const auto now_be = BigEndian64(ToUnixNanos(now));
  std::size_t deleted = 0;
  while (deleted < limit) {
    const std::size_t batch =
        std::min(PostgresStore::kPurgeBatch, limit - deleted);
    const auto batch_be = BigEndian64(static_cast<std::int64_t>(batch));
    IDEM_ASSIGN_OR_RETURN(
        const PgResult r,
        c.Run(kPurge, {View(now_be), View(batch_be)}, "purge"));
    const std::size_t n = Affected(r);
    deleted += n;
    if (n < batch) break;
  }
  return deleted;
}

}  // namespace idem::postgres_internal
