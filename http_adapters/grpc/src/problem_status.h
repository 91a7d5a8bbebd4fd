// idem's own answers as gRPC statuses: the Guard's problem response (its
// `code`, detail and Retry-After, core's kProblems) mapped by one table to a
// status code and a status message saying what to do, with trailing
// metadata "idem-problem: <code>" and, when the Guard invites a retry,
// "retry-after: <seconds>". SEMANTICS.md, "gRPC", lists the table.
//
// Thread-safety: pure functions (they add metadata to the given context).

#ifndef IDEM_GRPC_SRC_PROBLEM_STATUS_H_
#define IDEM_GRPC_SRC_PROBLEM_STATUS_H_

#include <string>
#include <string_view>

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "idem/response.h"

namespace idem::grpc {

// The status of a Guard problem response (a kRespond decision that is not a
// replay), its trailing metadata added to `context`.
::grpc::Status ProblemStatus(const Response& problem,
                             ::grpc::ServerContextBase& context);

// The same for a problem code the adapter finds itself (a stored call that
// does not decode: problem_code::kRecordDamaged).
::grpc::Status ProblemStatus(std::string_view code,
                             ::grpc::ServerContextBase& context);

}  // namespace idem::grpc

#endif  // IDEM_GRPC_SRC_PROBLEM_STATUS_H_
