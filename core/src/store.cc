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

}  // namespace idem
