// The Guard's view of one gRPC call (core's RequestView): method "POST",
// target and route the full method name, headers the client's metadata (the
// idempotency-key among them, repeated keys kept), body the request
// message's deterministic serialization, scope from the adapter's resolver.
// A request whose serialized size is over the route's max_request_body is
// not serialized: body_too_large. Thread-safety: single owner; not
// movable (the view points into it).

#ifndef IDEM_GRPC_SRC_CALL_VIEW_H_
#define IDEM_GRPC_SRC_CALL_VIEW_H_

#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>

#include "idem/guard.h"
#include "method_core.h"

namespace idem::grpc {

// Serializes `message` deterministically (map entries in key order) into
// `out`, replacing its contents.
void SerializeDeterministic(const google::protobuf::Message& message,
                            std::string& out);

class CallView {
 public:
  CallView(const ::grpc::ServerContextBase& context,
           const google::protobuf::Message& request, const MethodCore& method);
  CallView(const CallView&) = delete;
  CallView& operator=(const CallView&) = delete;

  const RequestView& view() const { return view_; }

 private:
  std::vector<HeaderView> headers_;
  std::string body_;
  std::optional<std::string> scope_;
  RequestView view_;
};

}  // namespace idem::grpc

#endif  // IDEM_GRPC_SRC_CALL_VIEW_H_
