// The Guard's view of one gRPC call (core's RequestView): method "POST",
// target and route the full method name, headers the client's metadata (the
// idempotency-key among them, repeated keys kept), body the request
// message's deterministic serialization, scope from the adapter's resolver.
// A request whose serialized size is over the route's max_request_body is
// not serialized: body_too_large. Thread-safety: single owner; not
// movable (the view points into it).

#ifndef IDEM_GRPC_SRC_CALL_VIEW_H_
#define IDEM_GRPC_SRC_CALL_VIEW_H_

#include <array>
#include <cstddef>
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
  // A call's metadata and request mostly fit in place: the view then costs
  // no allocation (one each when they do not).
  static constexpr std::size_t kInlineHeaders = 16;
  static constexpr std::size_t kInlineBody = 256;

  // `request`, of ByteSizeLong() `size` <= kInlineBody, serialized
  // deterministically into inline_body_; false when it did not come out at
  // that size.
  bool SerializeInPlace(const google::protobuf::Message& request,
                        std::size_t size);

  std::array<HeaderView, kInlineHeaders> inline_headers_;
  std::vector<HeaderView> headers_;
  char inline_body_[kInlineBody];
  std::string body_;
  std::optional<std::string> scope_;
  RequestView view_;
};

}  // namespace idem::grpc

#endif  // IDEM_GRPC_SRC_CALL_VIEW_H_
