#include "problem_status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "idem/grpc/method_options.h"
#include "idem/problem.h"

namespace idem::grpc {
namespace {

using ::grpc::StatusCode;

// One row per problem code the Guard answers with. `message`: the status
// message, in gRPC's words; empty: the Guard's own detail, which names the
// limit or the key error (said in gRPC's words: metadata, message, method).
struct ProblemStatusRow {
  std::string_view code;
  StatusCode status;
  std::string_view message;
};

constexpr ProblemStatusRow kProblemStatuses[] = {
    {problem_code::kKeyMissing, StatusCode::INVALID_ARGUMENT,
     "This method requires idempotency-key metadata: send a unique value (a "
     "UUID, say) and send the same value again when you retry."},
    {problem_code::kKeyInvalid, StatusCode::INVALID_ARGUMENT, ""},
    {problem_code::kRequestTooLarge, StatusCode::RESOURCE_EXHAUSTED, ""},
    // Not answered to the adapter's methods, which clear fingerprint_fields
    // (a message is protobuf); a client's error all the same.
    {problem_code::kBodyNotJson, StatusCode::INVALID_ARGUMENT,
     "This method identifies a call by members of a JSON request message, "
     "and this message is not JSON."},
    {problem_code::kKeyReused, StatusCode::FAILED_PRECONDITION,
     "This idempotency-key was already used for a different request; send a "
     "new key for a new request."},
    {problem_code::kInProgress, StatusCode::ABORTED,
     "A call with this idempotency-key is still being processed; retry with "
     "the same key after the retry-after seconds."},
    {problem_code::kStoreUnavailable, StatusCode::UNAVAILABLE,
     "The server cannot check this call's idempotency-key right now; retry "
     "later with the same key."},
    {problem_code::kStoreFull, StatusCode::RESOURCE_EXHAUSTED,
     "The server cannot accept more idempotent calls right now; retry later "
     "with the same key."},
    {problem_code::kRecordDamaged, StatusCode::DATA_LOSS,
     "The stored result of this idempotency-key is damaged; the call was not "
     "run. Contact the operator, or send a new key if the call must run "
     "now."},
    {problem_code::kAuthenticationRequired, StatusCode::UNAUTHENTICATED,
     "Calls with an idempotency-key to this method must be authenticated."},
    {problem_code::kRouteInvalid, StatusCode::INTERNAL,
     "The server's idempotency settings for this method are invalid; the "
     "call was not run."},
};

// The Guard's detail in gRPC's words.
std::string AsGrpcWording(std::string detail) {
  static constexpr std::pair<std::string_view, std::string_view> kWords[] = {
      {"Idempotency-Key header", "idempotency-key metadata"},
      {"request body", "request message"},
      {"this endpoint", "this method"},
  };
  for (const auto& [http, grpc] : kWords) {
    for (std::size_t at = detail.find(http); at != std::string::npos;
         at = detail.find(http, at + grpc.size())) {
      detail.replace(at, http.size(), grpc);
    }
  }
  return detail;
}

// Retry-After's whole seconds (the Guard sends nothing else) as
// milliseconds; nullopt for anything that is not a plain number of at most
// a day, which would say nothing gRPC could use.
std::optional<std::string> PushbackMs(std::string_view retry_after) {
  constexpr std::uint64_t kMaxSeconds = 86400;
  if (retry_after.empty() || retry_after.size() > 5) return std::nullopt;
  std::uint64_t seconds = 0;
  for (char c : retry_after) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (seconds > kMaxSeconds) return std::nullopt;
  return std::to_string(seconds * 1000);
}

::grpc::Status Answer(std::string_view code, std::string detail,
                      std::string_view retry_after,
                      ::grpc::ServerContextBase& context) {
  const ProblemStatusRow* row = nullptr;
  for (const ProblemStatusRow& r : kProblemStatuses) {
    if (r.code == code) row = &r;
  }
  // A code this table does not know (a newer core): the server's fault,
  // never a status that would invite a client to treat it as its own.
  const StatusCode status = row ? row->status : StatusCode::INTERNAL;
  std::string message = row && !row->message.empty()
                            ? std::string(row->message)
                            : AsGrpcWording(std::move(detail));
  context.AddTrailingMetadata(std::string(kProblemMetadata),
                              code.empty() ? "unknown" : std::string(code));
  if (!retry_after.empty()) {
    context.AddTrailingMetadata(std::string(kRetryAfterMetadata),
                                std::string(retry_after));
    // Pushback only where a retry policy would retry at all (the codes
    // docs/GRPC.md lists as retryable); RESOURCE_EXHAUSTED is not retried.
    if (status == StatusCode::ABORTED || status == StatusCode::UNAVAILABLE) {
      if (std::optional<std::string> ms = PushbackMs(retry_after)) {
        context.AddTrailingMetadata(std::string(kRetryPushbackMetadata),
                                    std::move(*ms));
      }
    }
  }
  return ::grpc::Status(status, std::move(message));
}

}  // namespace

::grpc::Status ProblemStatus(const Response& problem,
                             ::grpc::ServerContextBase& context) {
  std::string code;
  std::string detail;
  const nlohmann::json body =
      nlohmann::json::parse(problem.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_object()) {
    if (auto it = body.find("code"); it != body.end() && it->is_string()) {
      code = it->get<std::string>();
    }
    if (auto it = body.find("detail"); it != body.end() && it->is_string()) {
      detail = it->get<std::string>();
    }
  }
  const std::string_view retry_after =
      problem.FindHeader("Retry-After").value_or(std::string_view());
  return Answer(code, std::move(detail), retry_after, context);
}

::grpc::Status ProblemStatus(std::string_view code,
                             ::grpc::ServerContextBase& context) {
  return Answer(code, "", "", context);
}

}  // namespace idem::grpc
