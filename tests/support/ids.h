// Deterministic record ids and fingerprints for tests: distinct numbers give
// distinct, hash-like values (spread over every byte, as SHA-256 outputs
// are), and a number gives the same value in every run and every test.

#ifndef IDEM_TESTS_SUPPORT_IDS_H_
#define IDEM_TESTS_SUPPORT_IDS_H_

#include <cstdint>

#include "idem/types.h"

namespace idem::testing {

RecordId TestId(std::uint64_t n);
Fingerprint TestFingerprint(std::uint64_t n);
Token TestToken(std::uint64_t n);

// The generator behind them (SplitMix64), for tests that need a
// deterministic stream of numbers: advances `state`, returns the next one.
std::uint64_t SplitMix64(std::uint64_t& state);

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_IDS_H_
