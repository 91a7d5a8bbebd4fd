// Fixed-size byte identifiers used between the Guard and the stores.
//
// A store never sees a client key or a scope: only a RecordId (SHA-256 of
// scope and key), a Fingerprint (SHA-256 of the request) and a Token
// (random bits that fence one claim).
//
// Thread-safety: plain values.

#ifndef IDEM_TYPES_H_
#define IDEM_TYPES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace idem {

template <std::size_t N, typename Tag>
struct ByteId {
  static constexpr std::size_t kSize = N;
  std::array<std::uint8_t, N> bytes{};

  friend bool operator==(const ByteId&, const ByteId&) = default;
  friend auto operator<=>(const ByteId&, const ByteId&) = default;

  std::string_view view() const {
    return {reinterpret_cast<const char*>(bytes.data()), N};
  }
  // Lowercase hex, for logs and tools.
  std::string ToHex() const {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out(2 * N, '0');
    for (std::size_t i = 0; i < N; ++i) {
      out[2 * i] = kDigits[bytes[i] >> 4];
      out[2 * i + 1] = kDigits[bytes[i] & 0xF];
    }
    return out;
  }
  // The first 8 bytes as an integer: ids and fingerprints are hashes, so this
  // is already uniformly distributed and usable as a hash-table hash.
  std::uint64_t Prefix64() const {
    std::uint64_t v;
    std::memcpy(&v, bytes.data(), sizeof v);
    return v;
  }
  // Copies exactly N bytes; returns false (leaving *this unchanged) when the
  // input has another length.
  bool Assign(std::string_view raw) {
    if (raw.size() != N) return false;
    std::memcpy(bytes.data(), raw.data(), N);
    return true;
  }
};

struct RecordIdTag;
struct FingerprintTag;
struct TokenTag;

// SHA-256(len(scope) || scope || key); see record_id.h.
using RecordId = ByteId<32, RecordIdTag>;
// SHA-256 over method, target, configured headers and body; see fingerprint.h.
using Fingerprint = ByteId<32, FingerprintTag>;
// 128 random bits, new for every successful claim; see token.h.
using Token = ByteId<16, TokenTag>;

}  // namespace idem

#endif  // IDEM_TYPES_H_
