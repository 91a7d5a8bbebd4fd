// A plain SHA-256, for the library's own tests and benchmarks. Not
// installed: the fingerprint API (idem/fingerprint.h) is what applications
// use; this is the baseline the fingerprint benchmark compares against and
// the reference the fingerprint tests check digests with. Reached through
// the build-only target idem::core_internal.

#ifndef IDEM_INTERNAL_SHA256_H_
#define IDEM_INTERNAL_SHA256_H_

#include <array>
#include <cstdint>
#include <string_view>

namespace idem {

// The SHA-256 of `data`, hashed with this thread's FingerprintBuilder (the
// same per-thread context as ComputeFingerprint). Thread-safe; aborts as
// FingerprintBuilder does when OpenSSL cannot hash.
std::array<std::uint8_t, 32> Sha256(std::string_view data);

}  // namespace idem

#endif  // IDEM_INTERNAL_SHA256_H_
