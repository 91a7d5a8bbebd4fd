#include "idem/store.h"

#include <algorithm>

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

// Until every backend implements it (then it becomes pure virtual).
Result<bool> Store::ExtendLock(const RecordId&, const Token&, TimePoint,
                               Duration) {
  return MakeError(
      ErrorCode::kInternal,
      "ExtendLock is not implemented by the " + Info().name + " store");
}

Result<std::optional<StoreStats>> Store::Stats(TimePoint) {
  return std::optional<StoreStats>();
}

}  // namespace idem
