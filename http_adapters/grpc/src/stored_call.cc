#include "stored_call.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

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

// Reading it back the same way: views into the body, where parsing a
// StoredCall message copied every field (the response twice, once more
// into the reply) and cost an arena.
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// The bytes of the length-delimited field whose tag `in` just read.
bool ReadBytes(CodedInputStream& in, std::string_view whole,
               std::string_view& out) {
  std::uint64_t size = 0;
  if (!in.ReadVarint64(&size)) return false;
  const int left = in.BytesUntilLimit();
  if (left < 0 || size > static_cast<std::uint64_t>(left)) return false;
  out = whole.substr(static_cast<std::size_t>(in.CurrentPosition()),
                     static_cast<std::size_t>(size));
  return in.Skip(static_cast<int>(size));
}

// Reads fields up to `in`'s limit, each known one (its number and wire
// type) to `known`, which returns false on a malformed one; the others are
// skipped as protobuf skips unknown fields. False when a field is
// malformed or the fields end before the limit.
template <typename Known>
bool ReadFields(CodedInputStream& in, Known&& known) {
  while (in.BytesUntilLimit() > 0) {
    const std::uint32_t tag = in.ReadTagNoLastTag();
    if (tag == 0) return false;  // A broken varint, or field number 0.
    const int field = static_cast<int>(WireFormatLite::GetTagFieldNumber(tag));
    const int wire = static_cast<int>(WireFormatLite::GetTagWireType(tag));
    if (field == 0) return false;
    bool read = false;
    if (!known(field, wire, read)) return false;
    if (!read && !WireFormatLite::SkipField(&in, tag)) return false;
  }
  return in.BytesUntilLimit() == 0;
}

}  // namespace

bool ReadStoredCall(std::string_view encoded, DecodedCall& call,
                    MetadataSink* sink) {
  if (encoded.size() > static_cast<std::size_t>(INT32_MAX)) return false;
  call = DecodedCall();
  CodedInputStream in(reinterpret_cast<const std::uint8_t*>(encoded.data()),
                      static_cast<int>(encoded.size()));
  in.PushLimit(static_cast<int>(encoded.size()));
  return ReadFields(in, [&](int field, int wire, bool& read) {
    if (field == 1 && wire == kVarint) {
      std::uint64_t code = 0;
      if (!in.ReadVarint64(&code)) return false;
      // int32 as protobuf reads it: the low 32 bits.
      call.code = static_cast<std::int32_t>(static_cast<std::uint32_t>(code));
      read = true;
      return true;
    }
    if (field < 2 || field > 6 || wire != kLengthDelimited) return true;
    read = true;
    std::string_view bytes;
    if (!ReadBytes(in, encoded, bytes)) return false;
    switch (field) {
      case 2:
        call.message = bytes;
        return true;
      case 3:
        call.details = bytes;
        return true;
      case 6:
        call.response = bytes;
        return true;
      default:
        break;
    }
    // A MetadataEntry (fields 4 and 5): key 1, value 2.
    std::string_view key;
    std::string_view value;
    CodedInputStream entry(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                           static_cast<int>(bytes.size()));
    entry.PushLimit(static_cast<int>(bytes.size()));
    const bool ok =
        ReadFields(entry, [&](int entry_field, int entry_wire, bool& got) {
          if ((entry_field != 1 && entry_field != 2) ||
              entry_wire != kLengthDelimited) {
            return true;
          }
          got = true;
          return ReadBytes(entry, bytes, entry_field == 1 ? key : value);
        });
    if (!ok) return false;
    if (sink != nullptr) sink->Entry(field == 5, key, value);
    return true;
  });
}

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

namespace {

// The stored metadata added to the call.
class ContextSink final : public MetadataSink {
 public:
  explicit ContextSink(::grpc::ServerContextBase& context)
      : context_(context) {}
  void Entry(bool trailing, std::string_view key,
             std::string_view value) override {
    // gRPC copies what it is given: these are reused by this thread's
    // replays rather than allocated for each entry.
    thread_local std::string key_copy;
    thread_local std::string value_copy;
    key_copy.assign(key);
    value_copy.assign(value);
    if (trailing) {
      context_.AddTrailingMetadata(key_copy, value_copy);
    } else {
      context_.AddInitialMetadata(key_copy, value_copy);
    }
  }

 private:
  ::grpc::ServerContextBase& context_;
};

}  // namespace

std::optional<::grpc::Status> ApplyReplay(const Response& replay,
                                          ::grpc::ServerContextBase& context,
                                          google::protobuf::Message& response) {
  std::string_view body = replay.body;
  if (!body.starts_with(kFormatTag)) return std::nullopt;
  body.remove_prefix(kFormatTag.size());
  // Checked whole before anything of it reaches the call.
  DecodedCall call;
  if (!ReadStoredCall(body, call, nullptr)) return std::nullopt;
  if (call.code < 0 || call.code > kLastCode ||
      replay.status != kGuardStatusBase + call.code) {
    return std::nullopt;
  }
  const auto code = static_cast<::grpc::StatusCode>(call.code);
  // Parsed in place: gRPC's response message is not sent unless the status
  // is OK, and is left empty when the stored one does not parse.
  if (code == ::grpc::StatusCode::OK &&
      !response.ParseFromArray(call.response.data(),
                               static_cast<int>(call.response.size()))) {
    response.Clear();
    return std::nullopt;
  }
  // The same bytes, read again: this time they are.
  ContextSink sink(context);
  ReadStoredCall(body, call, &sink);
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
  return ::grpc::Status(code, std::string(call.message),
                        std::string(call.details));
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
