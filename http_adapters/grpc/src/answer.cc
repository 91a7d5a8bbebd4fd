#include "answer.h"

#include <string>

#include "idem/problem.h"
#include "problem_status.h"
#include "stored_call.h"

namespace idem::grpc {

::grpc::Status AnswerFromGuard(const MethodCore& method, Outcome outcome,
                               const Response& response,
                               ::grpc::ServerContextBase& context,
                               google::protobuf::Message& reply) {
  if (outcome != Outcome::kReplayed) return ProblemStatus(response, context);
  if (std::optional<::grpc::Status> replayed =
          ApplyReplay(response, context, reply)) {
    return *replayed;
  }
  method.adapter->Log(
      LogLevel::kError,
      "gRPC " + method.full_name +
          ": a stored call does not decode as the gRPC adapter's format "
          "(damaged, or written by another adapter under the same key and "
          "scope); answered DATA_LOSS, not replayed. idemctl can revoke "
          "the record.");
  return ProblemStatus(problem_code::kRecordDamaged, context);
}

::grpc::Status HandlerFailed(const MethodCore& method, std::string_view what) {
  method.adapter->Log(
      LogLevel::kError,
      "gRPC " + method.full_name +
          ": the handler failed (its key was released): " + std::string(what));
  return ::grpc::Status(::grpc::StatusCode::UNKNOWN,
                        "The method's handler failed.");
}

::grpc::Status AdapterFailed(const MethodCore& method, std::string_view what) {
  method.adapter->Log(
      LogLevel::kError,
      "gRPC " + method.full_name + ": the call failed: " + std::string(what));
  return ::grpc::Status(::grpc::StatusCode::INTERNAL,
                        "The server failed to serve this call.");
}

::grpc::Status NotSetUp() {
  return ::grpc::Status(::grpc::StatusCode::INTERNAL,
                        "This method's idempotency protection was never set "
                        "up; the call was not run.");
}

}  // namespace idem::grpc
