// What every store benchmark shares: the ids it claims, the fingerprint and
// response it stores, and the fixed time it claims at, so that the numbers
// of different binaries describe the same work.

#ifndef IDEM_BENCHMARKS_BENCH_UTIL_H_
#define IDEM_BENCHMARKS_BENCH_UTIL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <latch>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// Runs `op(thread)` on min(threads, pool) threads at once until every one
// of them has done `ops` operations; the first error (empty: none). For a
// store that opens its connections lazily (PostgreSQL: ~15 ms each) and
// whose sessions plan a prepared statement afresh for its first 5
// executions: without it those one-time costs fall inside the timed loop,
// a large share of a short multi-threaded run, while a raw pool opens and
// prepares before timing. The others keep the last one company, so that
// the pool grows to what `pool` concurrent callers need.
template <typename Op>
std::string WarmUp(int threads, int pool, int ops, Op op) {
  const int n = std::min(threads, pool);
  std::latch start(n);
  std::atomic<int> done{0};
  std::atomic<bool> failed{false};
  std::string error;
  std::vector<std::thread> workers;
  for (int t = 0; t < n; ++t) {
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 1; done.load() < n && !failed.load(); ++i) {
        std::string e = op(t);
        if (!e.empty()) {
          if (!failed.exchange(true)) error = std::move(e);
          return;
        }
        if (i == ops) done.fetch_add(1);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  return error;
}

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_BENCH_UTIL_H_
