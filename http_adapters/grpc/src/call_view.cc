#include "call_view.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

namespace idem::grpc {

void SerializeDeterministic(const google::protobuf::Message& message,
                            std::string& out) {
  out.clear();
  const std::size_t size = message.ByteSizeLong();
  out.reserve(size);
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeWithCachedSizes(&coded);
  // `coded` trims `out` to what was written when it is destroyed, here.
}

CallView::CallView(const ::grpc::ServerContextBase& context,
                   const google::protobuf::Message& request,
                   const MethodCore& method) {
  const auto& metadata = context.client_metadata();
  headers_.reserve(metadata.size());
  for (const auto& [key, value] : metadata) {
    headers_.emplace_back(std::string_view(key.data(), key.size()),
                          std::string_view(value.data(), value.size()));
  }
  // Not serialized at all when too large: the Guard answers (or bypasses)
  // without the body, as an HTTP adapter that stopped reading it.
  const bool too_large =
      request.ByteSizeLong() > method.route->max_request_body;
  if (!too_large) SerializeDeterministic(request, body_);
  scope_ = method.adapter->scope(context);
  view_.method = "POST";
  view_.target = method.full_name;
  view_.route = method.full_name;
  view_.headers = headers_;
  view_.body = body_;
  view_.body_too_large = too_large;
  if (scope_) view_.scope = *scope_;
}

}  // namespace idem::grpc
