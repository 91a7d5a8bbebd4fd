#include "stored_call.h"

#include <algorithm>
#include <string_view>

#include "call_view.h"
#include "stored_call.pb.h"

namespace idem::grpc {
namespace {

// Starts every stored call's body: a record written by anything else (an
// HTTP route sharing the store, a later format) is never taken for one.
constexpr std::string_view kFormatTag = "idem-grpc-call/1\n";
constexpr int kLastCode = static_cast<int>(::grpc::StatusCode::UNAUTHENTICATED);

bool Allowed(const std::vector<std::string>& allowlist,
             const std::string& key) {
  return std::find(allowlist.begin(), allowlist.end(), key) != allowlist.end();
}

void Keep(const MetadataEntries& entries,
          const std::vector<std::string>& allowlist,
          google::protobuf::RepeatedPtrField<internal::MetadataEntry>& out) {
  for (const auto& [key, value] : entries) {
    if (!Allowed(allowlist, key)) continue;
    internal::MetadataEntry* e = out.Add();
    e->set_key(key);
    e->set_value(value);
  }
}

}  // namespace

StatusSet StoredStatusSet(const std::vector<::grpc::StatusCode>& codes) {
  StatusSet set;
  for (::grpc::StatusCode code : codes) set.Add(GuardStatus(code));
  return set;
}

Response EncodeCall(const ::grpc::Status& status,
                    const google::protobuf::Message& response,
                    const ReplyMetadata& metadata, const MethodCore& method) {
  internal::StoredCall call;
  call.set_code(static_cast<int>(status.error_code()));
  call.set_message(status.error_message());
  call.set_details(status.error_details());
  Keep(metadata.initial(), method.replayed_initial,
       *call.mutable_initial_metadata());
  Keep(metadata.trailing(), method.replayed_trailing,
       *call.mutable_trailing_metadata());
  if (status.ok()) SerializeDeterministic(response, *call.mutable_response());
  Response stored;
  stored.status = GuardStatus(status.error_code());
  stored.body.assign(kFormatTag);
  call.AppendToString(&stored.body);
  return stored;
}

std::optional<::grpc::Status> ApplyReplay(const Response& replay,
                                          ::grpc::ServerContextBase& context,
                                          google::protobuf::Message& response) {
  std::string_view body = replay.body;
  if (!body.starts_with(kFormatTag)) return std::nullopt;
  body.remove_prefix(kFormatTag.size());
  internal::StoredCall call;
  if (!call.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return std::nullopt;
  }
  if (call.code() < 0 || call.code() > kLastCode ||
      replay.status != kGuardStatusBase + call.code()) {
    return std::nullopt;
  }
  const auto code = static_cast<::grpc::StatusCode>(call.code());
  if (code == ::grpc::StatusCode::OK) {
    std::unique_ptr<google::protobuf::Message> parsed(response.New());
    if (!parsed->ParseFromString(call.response())) return std::nullopt;
    response.CopyFrom(*parsed);
  }
  for (const auto& e : call.initial_metadata()) {
    context.AddInitialMetadata(e.key(), e.value());
  }
  for (const auto& e : call.trailing_metadata()) {
    context.AddTrailingMetadata(e.key(), e.value());
  }
  // The replay marker (the route's replay header, "idempotent-replayed").
  for (const auto& [name, value] : replay.headers) {
    std::string key = name;
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) {
      return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    });
    context.AddTrailingMetadata(key, value);
  }
  if (code == ::grpc::StatusCode::OK) return ::grpc::Status::OK;
  return ::grpc::Status(code, call.message(), call.details());
}

void SendMetadata(const ReplyMetadata& metadata,
                  ::grpc::ServerContextBase& context) {
  for (const auto& [key, value] : metadata.initial()) {
    context.AddInitialMetadata(key, value);
  }
  for (const auto& [key, value] : metadata.trailing()) {
    context.AddTrailingMetadata(key, value);
  }
}

}  // namespace idem::grpc
