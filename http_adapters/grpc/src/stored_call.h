// What the gRPC adapter stores of a completed call and how a replay is sent.
//
// The Guard sees a call's gRPC status code c as the status 600 + c
// (kGuardStatusBase): outside HTTP's statuses, one per code, so that the
// route's stored_statuses (built from MethodOptions::stored_statuses)
// decides per code. The record's body is the call encoded by
// proto/stored_call.proto behind a format tag: status code, message,
// details, the allowlisted metadata and the response message (OK only). A
// record that does not decode as that (another tag, a broken message, a
// status that disagrees) is damaged: answered DATA_LOSS, never replayed.
//
// Thread-safety: pure functions.

#ifndef IDEM_GRPC_SRC_STORED_CALL_H_
#define IDEM_GRPC_SRC_STORED_CALL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "idem/grpc/reply_metadata.h"
#include "idem/guard_options.h"
#include "idem/response.h"
#include "method_core.h"

namespace idem::grpc {

inline constexpr int kGuardStatusBase = 600;

inline int GuardStatus(::grpc::StatusCode code) {
  return kGuardStatusBase + static_cast<int>(code);
}

// The route's stored_statuses for these codes.
StatusSet StoredStatusSet(const std::vector<::grpc::StatusCode>& codes);

// The call as Finish stores it: status 600 + code, the encoded call as the
// body, no headers. `response` is serialized only when `status` is OK; of
// `metadata` only the method's allowlisted keys are kept. Throws
// std::logic_error when `response` changes size while it is serialized.
Response EncodeCall(const ::grpc::Status& status,
                    const google::protobuf::Message& response,
                    const ReplyMetadata& metadata, const MethodCore& method);

// A stored call's fields as the record's body holds them (views into it).
struct DecodedCall {
  std::int32_t code = 0;
  std::string_view message;
  std::string_view details;
  std::string_view response;
};

// Where ReadStoredCall sends the metadata entries (fields 4 and 5).
class MetadataSink {
 public:
  virtual void Entry(bool trailing, std::string_view key,
                     std::string_view value) = 0;

 protected:
  ~MetadataSink() = default;
};

// Reads `encoded` (a record's body after the format tag) as protobuf reads
// a StoredCall: fields in any order, the last of a repeated singular field
// kept, unknown fields (or known ones of another wire type) skipped, entry
// by entry to `sink` (none: only checked) in their order. False when it is
// not a StoredCall (a broken varint or length, field number 0, a stray
// end-group); `call` and what `sink` got are then meaningless. Reads no
// field into memory of its own: no allocation.
bool ReadStoredCall(std::string_view encoded, DecodedCall& call,
                    MetadataSink* sink);

// A replay (Decision::response of a kReplayed decision): fills `response`
// and `context`'s metadata (the stored initial and trailing metadata, and
// the replay's own headers, the idempotent-replayed marker, as trailing
// metadata) and returns the stored status; nullopt when the record does not
// decode, `context` untouched and `response` left empty.
std::optional<::grpc::Status> ApplyReplay(const Response& replay,
                                          ::grpc::ServerContextBase& context,
                                          google::protobuf::Message& response);

// Adds `metadata` to the call (all of it: the first call sends everything
// its handler set).
void SendMetadata(const ReplyMetadata& metadata,
                  ::grpc::ServerContextBase& context);

}  // namespace idem::grpc

#endif  // IDEM_GRPC_SRC_STORED_CALL_H_
