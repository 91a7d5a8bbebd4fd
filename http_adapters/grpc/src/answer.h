// What a call gets when the Guard answers instead of the handler (a
// kRespond decision): the stored call on a replay (or DATA_LOSS when it
// does not decode, logged without the key), idem's problem status
// otherwise. Shared by the callback and synchronous paths.

#ifndef IDEM_GRPC_SRC_ANSWER_H_
#define IDEM_GRPC_SRC_ANSWER_H_

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "idem/metrics.h"
#include "idem/response.h"
#include "method_core.h"

namespace idem::grpc {

::grpc::Status AnswerFromGuard(const MethodCore& method, Outcome outcome,
                               const Response& response,
                               ::grpc::ServerContextBase& context,
                               google::protobuf::Message& reply);

// The status of a handler that threw (its key already released), logged.
::grpc::Status HandlerFailed(const MethodCore& method, std::string_view what);

// The status of a call the adapter itself failed to serve (an exception
// outside the handler: the scope resolver's, an allocation), logged.
::grpc::Status AdapterFailed(const MethodCore& method, std::string_view what);

// The status of a call to a method object that was never made by
// IdempotentMethods (default-constructed): refused, never run unprotected.
::grpc::Status NotSetUp();

}  // namespace idem::grpc

#endif  // IDEM_GRPC_SRC_ANSWER_H_
