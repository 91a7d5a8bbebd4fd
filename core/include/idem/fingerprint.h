// The request fingerprint: what makes a retry "the same request".
//
// SHA-256 over, in order and each prefixed by its length as a 64-bit
// big-endian integer: the method, the request target (path + query as
// received), for every configured fingerprint header its lowercased name and
// its values joined by ", " (an absent header hashes as name + empty value),
// and the body (canonicalized first when body mode is kJson).
//
// The method and target are hashed exactly as received (no case folding, no
// percent-decoding): a retry is the same bytes sent again.
//
// Thread-safety: FingerprintBuilder is not thread-safe; use one per thread
// (ComputeFingerprint() below keeps one per thread for you).
// Hashing failures inside OpenSSL (no SHA-256 provider, out of memory) abort
// the process: there is no digest to return, and a wrong one would merge
// unrelated requests.

#ifndef IDEM_FINGERPRINT_H_
#define IDEM_FINGERPRINT_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "idem/types.h"

namespace idem {

enum class BodyFingerprint {
  kRaw,   // The body bytes as received.
  kJson,  // RFC 8785 canonical JSON; a body that is not JSON hashes raw.
};

struct FingerprintInput {
  std::string_view method;
  std::string_view target;
  // (name, value) pairs of the configured fingerprint headers only, already
  // selected by the caller, in the configured order; an absent header is
  // (name, ""). Adjacent pairs with the same name (ASCII case-insensitive)
  // are one header with several field lines and hash as one value joined by
  // ", ". Names are lowercased before hashing; values are hashed as given.
  std::span<const std::pair<std::string_view, std::string_view>> headers;
  std::string_view body;
  BodyFingerprint body_mode = BodyFingerprint::kRaw;
};

// Streams length-prefixed fields into one SHA-256 with a fetched EVP_MD and a
// reused context, which is what makes it cheap on the request path.
class FingerprintBuilder {
 public:
  FingerprintBuilder();
  ~FingerprintBuilder();
  FingerprintBuilder(const FingerprintBuilder&) = delete;
  FingerprintBuilder& operator=(const FingerprintBuilder&) = delete;

  // Starts a new message, discarding anything added since the last Finish.
  void Reset();
  // Appends u64be(field.size()) || field.
  void AddField(std::string_view field);
  // Appends raw bytes with no prefix.
  void AddRaw(std::string_view bytes);
  // The SHA-256 of everything added since the last Reset/Finish. The builder
  // is then ready for a new message (an implicit Reset).
  std::array<std::uint8_t, 32> Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The fingerprint of one request, hashed with this thread's builder. Does not
// allocate in kRaw mode; kJson mode allocates for the canonical form.
Fingerprint ComputeFingerprint(const FingerprintInput& input);

}  // namespace idem

#endif  // IDEM_FINGERPRINT_H_
