// The stored form of a response: what the Guard hands the store when a
// route seals (GuardOptions::response_keys), compresses
// (compress_stored_above) or keeps the record's times (on_replay), and how a
// replay or a tool (idemctl inspect --body) turns it back into the response.
//
// The envelope is an ordinary idem::Response, so no store, codec or SPI
// knows about it:
//  - status: the response's status, in clear (idemctl shows it);
//  - headers: exactly one, kStoredResponseHeader, whose value names the
//    format and what was done: "v1", then "; times=C,D,E" (created,
//    completed, expires, nanoseconds since the epoch), "; zstd" when
//    compressed, "; key=ID" when sealed with key ID;
//  - body: the payload — u32be(header count), each header as
//    u32be(len) name u32be(len) value, then the body — zstd-compressed
//    when "zstd" (one frame that states its size), then when sealed
//    nonce(12) || AES-256-GCM ciphertext || tag(16), with the associated
//    data "idem-stored-response-v1" || record id || fingerprint ||
//    u32be(status) || the header's value: a sealed response moved to another
//    record, another fingerprint or another status, or with its header
//    edited, does not open.
// A response without the header is a plain stored response (written with
// none of the three on, or before they were) and replays as it is.
//
// Thread-safety: free functions, safe from any thread.

#ifndef IDEM_STORED_RESPONSE_H_
#define IDEM_STORED_RESPONSE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/response.h"
#include "idem/response_keys.h"
#include "idem/types.h"

namespace idem {

inline constexpr std::string_view kStoredResponseHeader =
    "Idem-Stored-Response";

// How much a payload's headers may add to max_stored_response when a
// stored response is decoded (max_stored_response bounds the body only).
inline constexpr std::size_t kStoredHeadersAllowance = 64 * 1024;

struct StoredTimes {
  TimePoint created_at;
  TimePoint completed_at;
  TimePoint expires_at;
};

struct StoredResponseSettings {
  // Seal with keys->sealing_key(); null: not sealed.
  const ResponseKeyRing* keys = nullptr;
  // Compress a body larger than this (zstd at `compression_level`), when
  // that makes the payload smaller; 0: never.
  std::size_t compress_above = 0;
  int compression_level = 3;
  // Kept in the header when set.
  std::optional<StoredTimes> times;
};

// The stored form of `response` (status, the stored headers, the body) for
// the record `id` with fingerprint `fp`: `response` itself when nothing is
// to be done (no keys, nothing to compress, no times), the envelope above
// otherwise. kInternal when OpenSSL or zstd fails (no randomness, out of
// memory): the caller must not store the response then.
Result<Response> EncodeStoredResponse(const Response& response,
                                      const RecordId& id, const Fingerprint& fp,
                                      const StoredResponseSettings& settings);

struct DecodedStoredResponse {
  Response response;
  // Present when the envelope kept them.
  std::optional<StoredTimes> times;
};

// The response `stored` stands for. kDataLoss, with a message that names
// the key id and never a key, when it cannot be opened: sealed with a key
// `keys` does not have (or `keys` is null), a tag that does not match (a
// flipped bit, another record, another key with the same id), truncated, a
// frame that states a size above max_body + kStoredHeadersAllowance (a
// decompression bomb is refused before anything is allocated), or an
// envelope that does not parse.
Result<DecodedStoredResponse> DecodeStoredResponse(const Response& stored,
                                                   const RecordId& id,
                                                   const Fingerprint& fp,
                                                   const ResponseKeyRing* keys,
                                                   std::size_t max_body);

// The id of the key `stored` was sealed with, or nullopt when it is not
// sealed (plain, or only compressed). No key needed.
std::optional<std::string> SealingKeyId(const Response& stored);

}  // namespace idem

#endif  // IDEM_STORED_RESPONSE_H_
