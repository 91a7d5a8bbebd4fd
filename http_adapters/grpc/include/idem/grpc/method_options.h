// MethodOptions: how one protected gRPC method is protected, and the
// metadata names the gRPC adapter reads and writes (SEMANTICS.md, "gRPC").
//
// A protected call's fingerprint is SHA-256 over "POST", the full method
// name ("/package.Service/Method"), the values of the fingerprint_metadata
// keys, and the request message's deterministic serialization (protobuf's
// SetSerializationDeterministic: map fields in key order), so that a retry
// of the same message with the same configured metadata is the same
// request, whatever map order the client's library chose.
//
// Thread-safety: plain value.

#ifndef IDEM_GRPC_METHOD_OPTIONS_H_
#define IDEM_GRPC_METHOD_OPTIONS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/status.h>

#include "idem/guard_options.h"

namespace idem::grpc {

// The request metadata that carries the key, parsed exactly as the HTTP
// Idempotency-Key header (idem/idempotency_key.h: a bare token or an
// sf-string, at most max_key_length bytes; sent twice is invalid).
inline constexpr std::string_view kIdempotencyKeyMetadata = "idempotency-key";
// Trailing metadata of every replay: "idempotent-replayed: true".
inline constexpr std::string_view kReplayedMetadata = "idempotent-replayed";
// Trailing metadata of every answer idem gives instead of the handler's:
// the problem code the HTTP adapters put in their problem body
// (idem/problem.h, problem_code), e.g. "idempotency_key_reused".
inline constexpr std::string_view kProblemMetadata = "idem-problem";
// Trailing metadata of an ABORTED (in progress) or UNAVAILABLE / store-full
// answer: whole seconds to wait before retrying (GuardOptions::retry_after).
inline constexpr std::string_view kRetryAfterMetadata = "retry-after";
// Trailing metadata of the ABORTED and UNAVAILABLE answers among those: the
// same wait in milliseconds, in the form gRPC's own retry policy reads
// (server pushback), so a client whose service config retries these codes
// waits that long instead of its backoff.
inline constexpr std::string_view kRetryPushbackMetadata =
    "grpc-retry-pushback-ms";

// OK, INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
// FAILED_PRECONDITION, OUT_OF_RANGE, UNIMPLEMENTED: the answers a retry
// would get again. Every other code (CANCELLED, UNKNOWN,
// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNAVAILABLE,
// DATA_LOSS, UNAUTHENTICATED) releases the key: the next retry runs the
// handler again.
std::vector<::grpc::StatusCode> DefaultStoredStatuses();

struct MethodOptions {
  // The Guard options of this method: key_required, ttl, lock_timeout,
  // lock_wait, lock_renewal, retry_after, max_key_length, max_request_body
  // (against the request's serialized size), oversize_request,
  // max_stored_response (against the stored call: response message, status
  // message, details and stored metadata), anonymous, on_store_error,
  // store_backoff, key_per_operation. The adapter sets the fields that
  // describe HTTP itself from the fields below: stored_statuses,
  // fingerprint_headers, fingerprint_body (raw), fingerprint_fields (none:
  // a message is not JSON), stored_headers and the replay header; whatever
  // they hold here is ignored. Default: the Guard's own options.
  std::optional<GuardOptions> guard;
  // The status codes whose calls are stored and replayed; every other code
  // releases the key. Default: DefaultStoredStatuses().
  std::vector<::grpc::StatusCode> stored_statuses = DefaultStoredStatuses();
  // Request metadata keys (lowercase) that are part of the fingerprint, in
  // this order; an absent key hashes as empty. Default: none.
  std::vector<std::string> fingerprint_metadata;
  // Metadata the handler sets through ReplyMetadata (reply_metadata.h) that
  // is stored and replayed, by key (lowercase; "-bin" keys too). Other
  // metadata is sent on the first call only. Default: none.
  std::vector<std::string> replayed_initial_metadata;
  std::vector<std::string> replayed_trailing_metadata;
};

}  // namespace idem::grpc

#endif  // IDEM_GRPC_METHOD_OPTIONS_H_
