#include "support/ids.h"

#include <cstddef>
#include <cstring>

namespace idem::testing {

std::uint64_t SplitMix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

namespace {

// Distinct values for distinct (n, salt): ids and fingerprints of the same
// number differ.
template <typename Bytes>
Bytes MakeBytes(std::uint64_t n, std::uint64_t salt) {
  Bytes out;
  std::uint64_t state = n * 2654435761u + salt;
  for (std::size_t i = 0; i < Bytes::kSize; i += 8) {
    const std::uint64_t v = SplitMix64(state);
    std::memcpy(out.bytes.data() + i, &v, 8);
  }
  return out;
}

}  // namespace

RecordId TestId(std::uint64_t n) { return MakeBytes<RecordId>(n, 1); }

Fingerprint TestFingerprint(std::uint64_t n) {
  return MakeBytes<Fingerprint>(n, 2);
}

Token TestToken(std::uint64_t n) { return MakeBytes<Token>(n, 3); }

}  // namespace idem::testing
