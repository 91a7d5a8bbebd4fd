// RFC 9457 problem details for every answer idem gives instead of the
// handler's (SEMANTICS.md, "What a protected request gets").
//
// Bodies are application/problem+json with type, title (the status phrase),
// status, detail, instance (the request path; omitted when empty) and code.
// They never contain the key, the scope or the request body.
//
// Thread-safety: pure functions.

#ifndef IDEM_PROBLEM_H_
#define IDEM_PROBLEM_H_

#include <string>
#include <string_view>

#include "idem/clock.h"
#include "idem/response.h"

namespace idem {

inline constexpr std::string_view kProblemContentType =
    "application/problem+json";

// The machine-readable `code` member of idem's problems.
namespace problem_code {
inline constexpr std::string_view kKeyMissing = "idempotency_key_missing";
inline constexpr std::string_view kKeyInvalid = "idempotency_key_invalid";
inline constexpr std::string_view kRequestTooLarge = "request_too_large";
// 400: the route names the JSON members that identify a request
// (GuardOptions::fingerprint_fields) and the body is not JSON.
inline constexpr std::string_view kBodyNotJson = "idempotency_body_not_json";
inline constexpr std::string_view kKeyReused = "idempotency_key_reused";
inline constexpr std::string_view kInProgress =
    "idempotency_request_in_progress";
inline constexpr std::string_view kStoreUnavailable =
    "idempotency_store_unavailable";
inline constexpr std::string_view kStoreFull = "idempotency_store_full";
inline constexpr std::string_view kAuthenticationRequired =
    "idempotency_authentication_required";
// 500: the key's record cannot be decoded (step 8c); an operator revokes it.
inline constexpr std::string_view kRecordDamaged = "idempotency_record_damaged";
// 500: the route's GuardOptions are invalid (a server configuration bug).
inline constexpr std::string_view kRouteInvalid = "idempotency_route_invalid";
}  // namespace problem_code

struct Problem {
  int status = 400;
  std::string_view code;
  std::string detail;
  // The request path, without the query; omitted from the body when empty.
  std::string_view instance;
  std::string_view type = "about:blank";
  // Adds "Retry-After: <seconds, rounded up>" when > 0.
  Duration retry_after{0};
};

// The reason phrase of `status` ("Conflict"), or "Unknown Status".
std::string_view StatusPhrase(int status);

// The complete response: status, Content-Type, optional Retry-After, body.
Response MakeProblemResponse(const Problem& problem);

}  // namespace idem

#endif  // IDEM_PROBLEM_H_
