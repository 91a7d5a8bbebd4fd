#include "idem/store.h"

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

}  // namespace idem
