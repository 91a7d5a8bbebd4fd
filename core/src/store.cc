#include "idem/store.h"

#include <algorithm>
#include <string>

#include "idem/store/store_checks.h"
#include "idem/token.h"

namespace idem {

std::string_view ClaimOutcomeName(ClaimOutcome outcome) {
  switch (outcome) {
    case ClaimOutcome::kAcquired:
      return "acquired";
    case ClaimOutcome::kInProgress:
      return "in_progress";
    case ClaimOutcome::kCompleted:
      return "completed";
    case ClaimOutcome::kMismatch:
      return "mismatch";
  }
  return "unknown";
}

std::optional<ClaimResult> ClaimBlockedBy(const Record& existing,
                                          const Fingerprint& fp,
                                          TimePoint now) {
  if (existing.Expired(now)) return std::nullopt;
  ClaimResult result;
  if (existing.fingerprint != fp) {
    result.outcome = ClaimOutcome::kMismatch;
    return result;
  }
  if (existing.state == RecordState::kCompleted) {
    result.outcome = ClaimOutcome::kCompleted;
    result.response = existing.response;
    result.expires_at = existing.expires_at;
    return result;
  }
  if (existing.locked_until > now) {
    result.outcome = ClaimOutcome::kInProgress;
    result.locked_until = existing.locked_until;
    return result;
  }
  return std::nullopt;
}

namespace {

TimePoint AddSaturated(TimePoint now, Duration d) {
  if (now.time_since_epoch() > Duration::max() - d) return TimePoint::max();
  return now + d;
}

}  // namespace

Record NewClaimRecord(const Fingerprint& fp, TimePoint now, Duration ttl,
                      Duration lock_timeout) {
  Record fresh;
  fresh.state = RecordState::kInProgress;
  fresh.fingerprint = fp;
  fresh.token = NewToken();
  fresh.expires_at = AddSaturated(now, ttl);
  fresh.locked_until =
      std::min(AddSaturated(now, lock_timeout), fresh.expires_at);
  return fresh;
}

ClaimResult ClaimAcquired(const Record& fresh, bool takeover) {
  ClaimResult result;
  result.outcome = ClaimOutcome::kAcquired;
  result.token = fresh.token;
  result.takeover = takeover;
  result.locked_until = fresh.locked_until;
  return result;
}

std::optional<TimePoint> RenewedLockUntil(const Record& record,
                                          const Token& token, TimePoint now,
                                          Duration lock_timeout) {
  if (!record.HeldBy(token) || record.Expired(now)) return std::nullopt;
  // Never earlier: a renewal with a shorter lock_timeout than the claim's
  // (or a late one, with an older `now`) must not shorten a lock another
  // call of the same holder already promised.
  return std::max(record.locked_until,
                  std::min(AddSaturated(now, lock_timeout), record.expires_at));
}

void StoreStats::CountRows(bool is_expired, std::int64_t state,
                           std::uint64_t n) {
  if (is_expired) {
    expired += n;
  } else if (state == static_cast<std::int64_t>(RecordState::kCompleted)) {
    completed += n;
  } else if (state == static_cast<std::int64_t>(RecordState::kInProgress)) {
    in_progress += n;
  } else {
    damaged += n;  // No store writes another state.
  }
}

Result<std::optional<StoreStats>> Store::Stats(TimePoint) {
  return std::optional<StoreStats>();
}

Status CheckClaimDurations(std::string_view prefix, Duration ttl,
                           Duration lock_timeout) {
  if (ttl > Duration::zero() && lock_timeout > Duration::zero()) return {};
  return MakeError(
      ErrorCode::kInvalidArgument,
      std::string(prefix) + "ttl and lock_timeout must be positive");
}

Status CheckLockTimeout(std::string_view prefix, Duration lock_timeout) {
  if (lock_timeout > Duration::zero()) return {};
  return MakeError(ErrorCode::kInvalidArgument,
                   std::string(prefix) + "lock_timeout must be positive");
}

}  // namespace idem
