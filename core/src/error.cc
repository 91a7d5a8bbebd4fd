#include "idem/error.h"

namespace idem {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kDataLoss:
      return "data_loss";
    case ErrorCode::kResourceExhausted:
      return "resource_exhausted";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kAborted:
      return "aborted";
  }
  return "unknown";
}

std::string Error::ToString() const {
  std::string out(ErrorCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

}  // namespace idem
