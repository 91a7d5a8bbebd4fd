// Helpers shared by the memory store tests: deterministic ids and
// fingerprints, and a fixed starting time (no test reads the real clock).

#ifndef IDEM_TESTS_BACKENDS_MEMORY_MEMORY_TEST_UTIL_H_
#define IDEM_TESTS_BACKENDS_MEMORY_MEMORY_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <cstring>

#include "idem/clock.h"
#include "idem/types.h"

namespace idem::memory_test {

inline constexpr TimePoint kT0{std::chrono::hours(24 * 365 * 50)};

inline std::uint64_t SplitMix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Distinct, hash-like byte strings for distinct (n, salt).
template <typename IdType>
IdType MakeBytes(std::uint64_t n, std::uint64_t salt) {
  IdType out;
  std::uint64_t state = n * 2654435761u + salt;
  for (std::size_t i = 0; i < IdType::kSize; i += 8) {
    const std::uint64_t v = SplitMix64(state);
    std::memcpy(out.bytes.data() + i, &v, 8);
  }
  return out;
}

inline RecordId Id(std::uint64_t n) { return MakeBytes<RecordId>(n, 1); }
inline Fingerprint Fp(std::uint64_t n) { return MakeBytes<Fingerprint>(n, 2); }

}  // namespace idem::memory_test

#endif  // IDEM_TESTS_BACKENDS_MEMORY_MEMORY_TEST_UTIL_H_
