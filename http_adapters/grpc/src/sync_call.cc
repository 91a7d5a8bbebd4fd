// The synchronous API's protected call, on the gRPC thread that serves it:
// Guard::Run (store calls inline, lock_wait sleeping on the Guard's clock,
// lock renewal on the Guard's renewal thread), the handler, Finish before
// the status is returned (store-then-send).

#include <exception>
#include <string>

#include "answer.h"
#include "call_view.h"
#include "idem/grpc/protected_method.h"
#include "method_core.h"
#include "stored_call.h"

namespace idem::grpc {
namespace {

// The call's status. The handler's exceptions end here (its key released
// by Guard::Run); anything else thrown is the adapter's, answered INTERNAL
// by the caller.
::grpc::Status Serve(const MethodCore& method, ::grpc::ServerContext* context,
                     const google::protobuf::Message* request,
                     google::protobuf::Message* response) {
  CallView call(*context, *request, method);
  ReplyMetadata metadata;
  ::grpc::Status status;
  bool ran = false;
  RunInfo info;
  Response answer;
  bool failed = false;
  std::string failure;
  try {
    answer = method.adapter->guard->Run(
        call.view(),
        [&](ClaimHandle& claim) {
          ran = true;
          status = method.handler.RunSynchronous(
              CallArgs{context, request, response, &metadata});
          // Unprotected (pass-through): nothing is stored.
          if (!claim.active()) return Response();
          return EncodeCall(status, *response, metadata, method);
        },
        method.route, &info);
  } catch (const std::exception& e) {
    failed = true;
    failure = e.what();
  } catch (...) {
    failed = true;
    failure = "an exception that is not a std::exception";
  }
  // Run released the key of a handler that threw.
  if (failed) return HandlerFailed(method, failure);
  if (!ran) {
    return AnswerFromGuard(method, info.outcome, answer, *context, *response);
  }
  SendMetadata(metadata, *context);
  return status;
}

}  // namespace

::grpc::Status ProtectedMethod::CallSync(
    ::grpc::ServerContext* context, const google::protobuf::Message* request,
    google::protobuf::Message* response) const {
  if (!core_) return NotSetUp();
  try {
    return Serve(*core_, context, request, response);
  } catch (const std::exception& e) {
    return AdapterFailed(*core_, e.what());
  } catch (...) {
    return AdapterFailed(*core_, "an exception that is not a std::exception");
  }
}

}  // namespace idem::grpc
