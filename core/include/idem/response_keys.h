// ResponseKeyRing: the AES-256 keys that seal stored responses
// (GuardOptions::response_keys, stored_response.h), and the key file both
// idem-demo and idemctl read them from.
//
// The first key seals; every key opens. Rotation: put a new key first and
// keep the old ones until the records they sealed have expired (the longest
// ttl), then remove them. A record sealed with a key that is no longer in
// the ring cannot be opened: it answers 500 idempotency_record_damaged
// (docs/OPERATIONS.md).
//
// Key ids name keys in stored records and in logs: 1..64 characters of
// [A-Za-z0-9._-]. The key bytes are never logged, never part of an error
// message, and are wiped (OPENSSL_cleanse) when the ring is destroyed.
//
// Thread-safety: immutable once made; share it as shared_ptr<const>.

#ifndef IDEM_RESPONSE_KEYS_H_
#define IDEM_RESPONSE_KEYS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/error.h"

namespace idem {

class ResponseKeyRing {
 public:
  static constexpr std::size_t kKeySize = 32;  // AES-256.
  static constexpr std::size_t kMaxKeyIdLength = 64;
  using KeyBytes = std::array<std::uint8_t, kKeySize>;

  struct Key {
    std::string id;
    KeyBytes bytes{};
  };

  // The ring of `keys`, the first of which seals. kInvalidArgument (naming
  // the key id, never the key) when `keys` is empty, an id is malformed or
  // given twice. The key bytes in `keys` are wiped either way.
  static Result<std::shared_ptr<const ResponseKeyRing>> Create(
      std::vector<Key> keys);

  // The key file's text: one key per line as `id:64-hex-digits` (any case),
  // the first seals; blank lines and lines starting with '#' are skipped,
  // spaces around a line are ignored. kInvalidArgument naming the line
  // number of a malformed line (never its content), or "no keys". The
  // caller wipes `text` if it wants it wiped; Parse keeps no copy.
  static Result<std::shared_ptr<const ResponseKeyRing>> Parse(
      std::string_view text);

  // Reads and parses the key file at `path`. Refused (kInvalidArgument)
  // when it is not a regular file or any permission bit for group or others
  // is set (chmod 600), since the keys are as secret as the responses they
  // seal; kUnavailable when it cannot be opened or read. The buffer the
  // file was read into is wiped. Messages name the path and the line
  // number, never a key.
  static Result<std::shared_ptr<const ResponseKeyRing>> LoadFile(
      const std::string& path);

  ~ResponseKeyRing();
  ResponseKeyRing(const ResponseKeyRing&) = delete;
  ResponseKeyRing& operator=(const ResponseKeyRing&) = delete;

  // The key that seals: the first.
  const Key& sealing_key() const { return keys_.front(); }
  // The key named `id`, or nullptr.
  const Key* Find(std::string_view id) const;
  // The key ids, in ring order (for tools and logs).
  std::vector<std::string> ids() const;

  // Whether `id` is a well-formed key id.
  static bool ValidKeyId(std::string_view id);

 private:
  explicit ResponseKeyRing(std::vector<Key> keys) : keys_(std::move(keys)) {}
  std::vector<Key> keys_;
};

}  // namespace idem

#endif  // IDEM_RESPONSE_KEYS_H_
