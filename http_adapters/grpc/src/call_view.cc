#include "call_view.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <span>

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
  std::span<HeaderView> headers;
  if (metadata.size() <= kInlineHeaders) {
    headers = std::span<HeaderView>(inline_headers_.data(), metadata.size());
  } else {
    headers_.resize(metadata.size());
    headers = headers_;
  }
  std::size_t i = 0;
  for (const auto& [key, value] : metadata) {
    headers[i++] = HeaderView(std::string_view(key.data(), key.size()),
                              std::string_view(value.data(), value.size()));
  }
  // Not serialized at all when too large: the Guard answers (or bypasses)
  // without the body, as an HTTP adapter that stopped reading it.
  const std::size_t size = request.ByteSizeLong();
  const bool too_large = size > method.route->max_request_body;
  std::string_view body;
  if (too_large) {
    // Nothing: body_too_large says why.
  } else if (size <= kInlineBody && SerializeInPlace(request, size)) {
    body = std::string_view(inline_body_, size);
  } else {
    SerializeDeterministic(request, body_);
    body = body_;
  }
  scope_ = method.adapter->scope(context);
  view_.method = "POST";
  view_.target = method.full_name;
  view_.route = method.full_name;
  view_.headers = headers;
  view_.body = body;
  view_.body_too_large = too_large;
  if (scope_) view_.scope = *scope_;
}

bool CallView::SerializeInPlace(const google::protobuf::Message& request,
                                std::size_t size) {
  google::protobuf::io::ArrayOutputStream array(inline_body_,
                                                static_cast<int>(size));
  google::protobuf::io::CodedOutputStream coded(&array);
  coded.SetSerializationDeterministic(true);
  // The sizes ByteSizeLong cached.
  request.SerializeWithCachedSizes(&coded);
  return !coded.HadError() &&
         static_cast<std::size_t>(coded.ByteCount()) == size;
}

}  // namespace idem::grpc
