// What every store benchmark shares: the ids it claims, the fingerprint and
// response it stores, and the fixed time it claims at, so that the numbers
// of different binaries describe the same work.

#ifndef IDEM_BENCHMARKS_BENCH_UTIL_H_
#define IDEM_BENCHMARKS_BENCH_UTIL_H_

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "idem/clock.h"
#include "idem/response.h"
#include "idem/types.h"

namespace idem::bench {

// The instant every benchmark claims at: the time the process started.
// Records must be live by the real clock too (with the usual 24 h ttl), or
// RocksDB's compaction filter, which reads the store's system clock, drops
// them during a run and flatters it. Benchmarks never read the clock again.
inline const TimePoint kStart =
    std::chrono::time_point_cast<TimePoint::duration>(
        std::chrono::system_clock::now());

// Bijective 64-bit mixer (the SplitMix64 finalizer): distinct counters give
// distinct, uniformly spread id prefixes, for a couple of nanoseconds.
inline std::uint64_t Mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The id for `key`: a spread prefix (what stores hash or sort on), the raw
// counter after it. Distinct keys give distinct ids.
inline RecordId IdFor(std::uint64_t key) {
  RecordId id;
  const std::uint64_t prefix = Mix(key);
  std::memcpy(id.bytes.data(), &prefix, 8);
  std::memcpy(id.bytes.data() + 8, &key, 8);
  return id;
}

inline Fingerprint BenchFingerprint() {
  Fingerprint fp;
  for (std::size_t i = 0; i < fp.bytes.size(); ++i) {
    fp.bytes[i] = static_cast<std::uint8_t>(i * 37 + 11);
  }
  return fp;
}

// A typical small JSON answer of a "create" endpoint.
inline const Response& BenchResponse() {
  static const Response response{
      .status = 201,
      .headers = {{"Content-Type", "application/json"},
                  {"Location", "/orders/0123456789abcdef"}},
      .body = std::string(R"({"id":"0123456789abcdef","status":"created",)"
                          R"("amount":1999,"currency":"EUR"})")};
  return response;
}

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_BENCH_UTIL_H_
