#include "stored_call.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>

#include <google/protobuf/arena.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

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

// StoredCall (proto/stored_call.proto) written field by field, straight
// into the record's body: the bytes StoredCall's own serialization gives
// (fields in number order, empty ones left out), without building the
// message and copying its strings first (two allocations per field, and
// the response serialized twice).
using google::protobuf::io::CodedOutputStream;
constexpr int kVarint = 0;
constexpr int kLengthDelimited = 2;

constexpr std::uint32_t Tag(int field, int wire_type) {
  return static_cast<std::uint32_t>(field << 3 | wire_type);
}

std::size_t BytesFieldSize(std::size_t size) {
  return size == 0 ? 0 : 1 + CodedOutputStream::VarintSize64(size) + size;
}

void WriteBytesField(int field, std::string_view bytes,
                     CodedOutputStream& out) {
  if (bytes.empty()) return;
  out.WriteTag(Tag(field, kLengthDelimited));
  out.WriteVarint64(bytes.size());
  out.WriteRaw(bytes.data(), static_cast<int>(bytes.size()));
}

std::size_t EntrySize(const std::pair<std::string, std::string>& e) {
  return BytesFieldSize(e.first.size()) + BytesFieldSize(e.second.size());
}

// Fields 4 and 5: the allowlisted entries as MetadataEntry messages.
std::size_t MetadataSize(const MetadataEntries& entries,
                         const std::vector<std::string>& allowlist) {
  std::size_t size = 0;
  for (const auto& e : entries) {
    if (!Allowed(allowlist, e.first)) continue;
    const std::size_t entry = EntrySize(e);
    size += 1 + CodedOutputStream::VarintSize64(entry) + entry;
  }
  return size;
}

void WriteMetadata(int field, const MetadataEntries& entries,
                   const std::vector<std::string>& allowlist,
                   CodedOutputStream& out) {
  for (const auto& e : entries) {
    if (!Allowed(allowlist, e.first)) continue;
    out.WriteTag(Tag(field, kLengthDelimited));
    out.WriteVarint64(EntrySize(e));
    WriteBytesField(1, e.first, out);
    WriteBytesField(2, e.second, out);
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
  // int32 as protobuf writes it: a negative one sign-extended to 64 bits.
  const auto code = static_cast<std::uint64_t>(
      static_cast<std::int64_t>(static_cast<int>(status.error_code())));
  // Computed once here, used by SerializeWithCachedSizes below.
  const std::size_t response_size = status.ok() ? response.ByteSizeLong() : 0;
  const std::size_t size =
      kFormatTag.size() +
      (code == 0 ? 0 : 1 + CodedOutputStream::VarintSize64(code)) +
      BytesFieldSize(status.error_message().size()) +
      BytesFieldSize(status.error_details().size()) +
      MetadataSize(metadata.initial(), method.replayed_initial) +
      MetadataSize(metadata.trailing(), method.replayed_trailing) +
      BytesFieldSize(response_size);
  Response stored;
  stored.status = GuardStatus(status.error_code());
  stored.body.resize(size);
  std::memcpy(stored.body.data(), kFormatTag.data(), kFormatTag.size());
  {
    google::protobuf::io::ArrayOutputStream array(
        stored.body.data() + kFormatTag.size(),
        static_cast<int>(size - kFormatTag.size()));
    CodedOutputStream out(&array);
    out.SetSerializationDeterministic(true);
    if (code != 0) {
      out.WriteTag(Tag(1, kVarint));
      out.WriteVarint64(code);
    }
    WriteBytesField(2, status.error_message(), out);
    WriteBytesField(3, status.error_details(), out);
    WriteMetadata(4, metadata.initial(), method.replayed_initial, out);
    WriteMetadata(5, metadata.trailing(), method.replayed_trailing, out);
    if (response_size != 0) {
      out.WriteTag(Tag(6, kLengthDelimited));
      out.WriteVarint64(response_size);
      response.SerializeWithCachedSizes(&out);
    }
    // A response that changed size since ByteSizeLong (another thread
    // writing it while the handler's result is stored) is the handler's
    // bug; the record must not be cut or padded silently.
    if (out.HadError() ||
        static_cast<std::size_t>(out.ByteCount()) != size - kFormatTag.size()) {
      throw std::logic_error(
          "the response message changed while it was being stored");
    }
  }
  return stored;
}

std::optional<::grpc::Status> ApplyReplay(const Response& replay,
                                          ::grpc::ServerContextBase& context,
                                          google::protobuf::Message& response) {
  std::string_view body = replay.body;
  if (!body.starts_with(kFormatTag)) return std::nullopt;
  body.remove_prefix(kFormatTag.size());
  // Decoded on an arena whose first block is on this stack: a small record
  // costs no allocation beyond its longer strings'.
  alignas(std::max_align_t) char block[1024];
  google::protobuf::ArenaOptions arena_options;
  arena_options.initial_block = block;
  arena_options.initial_block_size = sizeof block;
  google::protobuf::Arena arena(arena_options);
  auto* call =
      google::protobuf::Arena::CreateMessage<internal::StoredCall>(&arena);
  if (!call->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return std::nullopt;
  }
  if (call->code() < 0 || call->code() > kLastCode ||
      replay.status != kGuardStatusBase + call->code()) {
    return std::nullopt;
  }
  const auto code = static_cast<::grpc::StatusCode>(call->code());
  // Parsed in place: gRPC's response message is not sent unless the status
  // is OK, and is left empty when the stored one does not parse.
  if (code == ::grpc::StatusCode::OK &&
      !response.ParseFromString(call->response())) {
    response.Clear();
    return std::nullopt;
  }
  for (const auto& e : call->initial_metadata()) {
    context.AddInitialMetadata(e.key(), e.value());
  }
  for (const auto& e : call->trailing_metadata()) {
    context.AddTrailingMetadata(e.key(), e.value());
  }
  // The replay marker (the route's replay header, "idempotent-replayed"),
  // lowercased as gRPC requires of metadata keys.
  for (const auto& [name, value] : replay.headers) {
    if (std::none_of(name.begin(), name.end(),
                     [](unsigned char c) { return c >= 'A' && c <= 'Z'; })) {
      context.AddTrailingMetadata(name, value);
      continue;
    }
    // Reused by this thread's replays (gRPC copies what it is given).
    thread_local std::string key;
    key.assign(name);
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) {
      return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    });
    context.AddTrailingMetadata(key, value);
  }
  if (code == ::grpc::StatusCode::OK) return ::grpc::Status::OK;
  return ::grpc::Status(code, call->message(), call->details());
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
