// The local cache under many threads (also run under ThreadSanitizer):
// claims, completions, releases and revokes of a few ids, each id used with
// two fingerprints whose completions store different bodies. Whatever the
// interleaving, a replay returns the body of its own fingerprint, and once
// the threads are done a revoke through the cache lets every id be claimed
// afresh.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "counting_store.h"
#include "idem/clock.h"
#include "idem/store/local_cache.h"
#include "support/ids.h"

namespace idem {
namespace {

using std::chrono::seconds;
using testing::CountingStore;
using testing::SplitMix64;
using testing::TestFingerprint;
using testing::TestId;

std::string BodyOf(const Fingerprint& fp) { return fp.ToHex(); }

TEST(LocalCacheConcurrencyTest, ReplaysAreAlwaysTheirFingerprintsResponse) {
  constexpr int kThreads = 8;
  constexpr int kOps = 3000;
  constexpr int kIds = 6;
  auto clock = std::make_shared<ManualClock>();
  const TimePoint now = clock->Now();
  auto wrapped = LocalCacheStore::Wrap(
      std::make_unique<CountingStore>(),
      {.max_records = 4, .ttl = seconds(5), .clock = clock});
  ASSERT_TRUE(wrapped.has_value());
  Store& cache = **wrapped;

  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0), errors(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::uint64_t seed = 1000 + t;
      for (int i = 0; i < kOps; ++i) {
        const std::uint64_t r = SplitMix64(seed);
        const RecordId id = TestId(r % kIds);
        const Fingerprint fp = TestFingerprint((r % kIds) * 2 + (r >> 8) % 2);
        if ((r >> 16) % 16 == 0) {
          if (!cache.Revoke(id)) ++errors[t];
          continue;
        }
        auto claim = cache.Claim(id, fp, now, seconds(60), seconds(10));
        if (!claim) {
          ++errors[t];
          continue;
        }
        if (claim->outcome == ClaimOutcome::kCompleted &&
            claim->response->body != BodyOf(fp)) {
          ++wrong[t];
        }
        if (claim->outcome != ClaimOutcome::kAcquired) continue;
        if ((r >> 24) % 4 == 0) {
          if (!cache.Release(id, claim->token)) ++errors[t];
        } else if (!cache.CompleteShared(id, claim->token,
                                         std::make_shared<const Response>(
                                             Response{200, {}, BodyOf(fp)}))) {
          ++errors[t];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(wrong[t], 0) << "thread " << t;
    EXPECT_EQ(errors[t], 0) << "thread " << t;
  }
  for (int i = 0; i < kIds; ++i) {
    ASSERT_TRUE(cache.Revoke(TestId(i)).has_value());
    auto claim = cache.Claim(TestId(i), TestFingerprint(99), now, seconds(60),
                             seconds(10));
    ASSERT_TRUE(claim.has_value());
    EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired) << "id " << i;
  }
  const LocalCacheCounters counters =
      static_cast<LocalCacheStore&>(cache).counters();
  EXPECT_GT(counters.hits, 0u);
}

}  // namespace
}  // namespace idem
