// Error values returned by every fallible idem call.
//
// idem never throws across its public API: a call that can fail returns
// Result<T>, an expected<T, Error>. The code says what the caller should do
// next, not what went wrong inside; the message is for people and logs and
// never contains a client key, a scope or a body.
//
// Thread-safety: Error is a value type; distinct objects may be used from
// different threads freely.

#ifndef IDEM_ERROR_H_
#define IDEM_ERROR_H_

#include <string>
#include <string_view>
#include <utility>

#include <tl/expected.hpp>

namespace idem {

enum class ErrorCode {
  // The call's arguments (a URI, an option, a size) are wrong. Retrying the
  // same call fails the same way.
  kInvalidArgument,
  // The backend cannot be reached or is busy right now (I/O error, lost
  // connection, lock timeout). Retrying the call later may succeed.
  kUnavailable,
  // A stored record cannot be decoded. Not retryable; the record must be
  // inspected or purged by an operator. Never treated as a missing record.
  kDataLoss,
  // A bounded resource is full (in-memory capacity of live records).
  // Retry after records expire or capacity is raised.
  kResourceExhausted,
  // A bug or an unexpected failure inside idem or a dependency.
  kInternal,
  // The caller's work was rolled back because another run took its
  // idempotency key over (sql::RunOnceInTransaction): nothing it did was
  // kept. Retrying with the same key gets that other run's result.
  kAborted,
};

// Stable lowercase name ("unavailable", ...) for logs and metrics.
std::string_view ErrorCodeName(ErrorCode code);

class Error {
 public:
  Error(ErrorCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "unavailable: <message>".
  std::string ToString() const;

  friend bool operator==(const Error&, const Error&) = default;

 private:
  ErrorCode code_;
  std::string message_;
};

template <typename T>
using Result = tl::expected<T, Error>;

// For calls that return nothing on success.
using Status = Result<void>;

// Builds the error side of a Result: `return MakeError(ErrorCode::kX, "...")`.
inline tl::unexpected<Error> MakeError(ErrorCode code, std::string message) {
  return tl::unexpected<Error>(Error(code, std::move(message)));
}

}  // namespace idem

// Propagation for functions returning a Result or Status.
//
// IDEM_RETURN_IF_ERROR(expr): evaluates `expr` (a Status or a Result<T>)
// once; on failure returns its Error from the enclosing function.
//
// IDEM_ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (a Result<T>) once; on
// failure returns its Error, else moves the value into `lhs`, which may be
// a declaration (`auto value`, `const Record& r`) or an existing variable.
#define IDEM_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    if (auto idem_status_ = (expr); !idem_status_) {                           \
      return ::tl::unexpected<::idem::Error>(std::move(idem_status_).error()); \
    }                                                                          \
  } while (false)

#define IDEM_ASSIGN_OR_RETURN(lhs, expr) \
  IDEM_ASSIGN_OR_RETURN_IMPL_(IDEM_CONCAT_(idem_result_, __LINE__), lhs, expr)

#define IDEM_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr)                 \
  auto result = (expr);                                                \
  if (!result) {                                                       \
    return ::tl::unexpected<::idem::Error>(std::move(result).error()); \
  }                                                                    \
  lhs = std::move(*result)

#define IDEM_CONCAT_(a, b) IDEM_CONCAT_INNER_(a, b)
#define IDEM_CONCAT_INNER_(a, b) a##b

#endif  // IDEM_ERROR_H_
