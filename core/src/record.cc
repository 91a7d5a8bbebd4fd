#include "idem/record.h"

namespace idem {

std::string_view RecordStateName(RecordState state) {
  switch (state) {
    case RecordState::kInProgress:
      return "in_progress";
    case RecordState::kCompleted:
      return "completed";
  }
  return "unknown";
}

bool operator==(const Record& a, const Record& b) {
  if (a.state != b.state || a.fingerprint != b.fingerprint ||
      a.token != b.token || a.locked_until != b.locked_until ||
      a.expires_at != b.expires_at) {
    return false;
  }
  if (!a.response || !b.response) return !a.response && !b.response;
  return *a.response == *b.response;
}

}  // namespace idem
