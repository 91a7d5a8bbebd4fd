// The local cache (idem/store/local_cache.h) over a counting memory store
// and a ManualClock: what it answers without a round trip, and every way a
// cached entry could replay what the store would not (a revoke here or
// elsewhere, a revoke racing a fill, expiry, a purge, a lost claim, another
// fingerprint).

#include "idem/store/local_cache.h"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "counting_store.h"
#include "idem/clock.h"
#include "idem/open_store.h"
#include "idem/testing/status_matchers.h"
#include "support/ids.h"

namespace idem {
namespace {

using std::chrono::seconds;
using testing::CountingStore;
using ::testing::HasSubstr;
using testing::TestFingerprint;
using testing::TestId;

constexpr Duration kTtl = seconds(60);
constexpr Duration kLock = seconds(10);
constexpr Duration kCacheTtl = seconds(5);

class LocalCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(100); }

  void Open(std::size_t records, std::size_t bytes = std::size_t{1} << 20,
            std::shared_ptr<Metrics> metrics = nullptr) {
    auto inner = std::make_unique<CountingStore>();
    inner_ = inner.get();
    auto wrapped = LocalCacheStore::Wrap(std::move(inner),
                                         {.max_records = records,
                                          .ttl = kCacheTtl,
                                          .max_bytes = bytes,
                                          .clock = clock_,
                                          .metrics = std::move(metrics)});
    ASSERT_TRUE(wrapped.has_value());
    cache_ = std::move(*wrapped);
  }
  LocalCacheStore& cache() { return static_cast<LocalCacheStore&>(*cache_); }

  // Claims and completes `id` with `fp` through the cache at `now`.
  void Complete(const RecordId& id, const Fingerprint& fp, TimePoint now,
                std::string body, Duration ttl = kTtl) {
    auto claim = cache_->Claim(id, fp, now, ttl, kLock);
    ASSERT_TRUE(claim.has_value());
    ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    auto done = cache_->CompleteShared(
        id, claim->token,
        std::make_shared<const Response>(Response{201, {}, std::move(body)}));
    ASSERT_TRUE(done.has_value() && *done);
  }
  ClaimOutcome ClaimAt(const RecordId& id, const Fingerprint& fp,
                       TimePoint now) {
    auto claim = cache_->Claim(id, fp, now, kTtl, kLock);
    EXPECT_TRUE(claim.has_value());
    return claim ? claim->outcome : ClaimOutcome::kInProgress;
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  const TimePoint t0_ = clock_->Now();
  CountingStore* inner_ = nullptr;
  std::unique_ptr<Store> cache_;
};

TEST_F(LocalCacheTest, OffIsTheInnerStoreItself) {
  auto inner = std::make_unique<CountingStore>();
  Store* raw = inner.get();
  auto wrapped = LocalCacheStore::Wrap(std::move(inner), {.max_records = 0});
  ASSERT_TRUE(wrapped.has_value());
  EXPECT_EQ(wrapped->get(), raw);
}

TEST_F(LocalCacheTest, ReplayOfARecordCompletedHereMakesNoStoreCall) {
  ASSERT_NO_FATAL_FAILURE(Complete(TestId(1), TestFingerprint(1), t0_, "a"));
  const int claims = inner_->claims;
  for (int i = 0; i < 3; ++i) {
    auto replay = cache_->Claim(TestId(1), TestFingerprint(1), t0_ + seconds(1),
                                kTtl, kLock);
    ASSERT_TRUE(replay.has_value());
    ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
    EXPECT_EQ(replay->response->body, "a");
    EXPECT_EQ(replay->response->status, 201);
  }
  EXPECT_EQ(inner_->claims, claims);
  EXPECT_EQ(inner_->inspects, 0);
  EXPECT_EQ(cache().counters().hits, 3u);
}

TEST_F(LocalCacheTest, AnotherFingerprintOnACachedKeyIsAMismatch) {
  ASSERT_NO_FATAL_FAILURE(Complete(TestId(1), TestFingerprint(1), t0_, "a"));
  const int claims = inner_->claims;
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(2), t0_),
            ClaimOutcome::kMismatch);
  EXPECT_EQ(inner_->claims, claims);  // Answered as the store would.
  // Ids stay apart: another id is the store's.
  EXPECT_EQ(ClaimAt(TestId(2), TestFingerprint(1), t0_),
            ClaimOutcome::kAcquired);
}

TEST_F(LocalCacheTest, AReplayFromTheStoreIsCachedWithItsExpiry) {
  // Completed by another instance: only the store knows it.
  auto claim = inner_->Claim(TestId(1), TestFingerprint(1), t0_, kTtl, kLock);
  ASSERT_TRUE(claim.has_value());
  ASSERT_TRUE(
      *inner_->Complete(TestId(1), claim->token, Response{200, {}, "x"}));
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_ + seconds(1)),
            ClaimOutcome::kCompleted);
  EXPECT_EQ(inner_->inspects, 0);  // The claim's answer said its expiry.
  const int claims = inner_->claims;
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_ + seconds(2)),
            ClaimOutcome::kCompleted);
  EXPECT_EQ(inner_->claims, claims);
  // Its expiry is the record's: at t0 + ttl the store decides (acquires).
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_ + kTtl),
            ClaimOutcome::kAcquired);
}

// A store that does not say when a replayed record expires: the
// synchronous claim reads the record back to cache it; the asynchronous
// one, which must not block the store's thread, leaves it uncached.
TEST_F(LocalCacheTest, AReplayWithoutItsExpiryIsReadBackOrLeftUncached) {
  inner_->forget_expiry = true;
  for (int id : {1, 2}) {
    auto claim =
        inner_->Claim(TestId(id), TestFingerprint(1), t0_, kTtl, kLock);
    ASSERT_TRUE(claim.has_value());
    ASSERT_TRUE(
        *inner_->Complete(TestId(id), claim->token, Response{200, {}, "x"}));
  }
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_ + seconds(1)),
            ClaimOutcome::kCompleted);
  EXPECT_EQ(inner_->inspects, 1);
  EXPECT_EQ(cache().size(), 1u);

  std::optional<Result<ClaimResult>> answer;
  cache_->ClaimAsync(TestId(2), TestFingerprint(1), t0_ + seconds(1), kTtl,
                     kLock, [&](Result<ClaimResult> r) { answer = r; });
  ASSERT_TRUE(answer.has_value() && answer->has_value());
  EXPECT_EQ((*answer)->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(inner_->inspects, 1);
  EXPECT_EQ(cache().size(), 1u);
}

// Through the asynchronous calls: a replay the store answers is cached from
// its answer, a completion made through the cache too; both are then
// answered inside the call.
TEST_F(LocalCacheTest, TheAsynchronousCallsFillTheCache) {
  auto claim = inner_->Claim(TestId(1), TestFingerprint(1), t0_, kTtl, kLock);
  ASSERT_TRUE(claim.has_value());
  ASSERT_TRUE(
      *inner_->Complete(TestId(1), claim->token, Response{200, {}, "x"}));
  const auto claim_async = [&](int id) {
    std::optional<Result<ClaimResult>> answer;
    cache_->ClaimAsync(TestId(id), TestFingerprint(1), t0_ + seconds(1), kTtl,
                       kLock, [&](Result<ClaimResult> r) { answer = r; });
    EXPECT_TRUE(answer.has_value() && answer->has_value());
    return answer && *answer ? **answer : ClaimResult{};
  };
  EXPECT_EQ(claim_async(1).outcome, ClaimOutcome::kCompleted);
  const ClaimResult acquired = claim_async(2);
  ASSERT_EQ(acquired.outcome, ClaimOutcome::kAcquired);
  std::optional<Result<bool>> completed;
  cache_->CompleteAsync(
      TestId(2), acquired.token,
      std::make_shared<const Response>(Response{201, {}, "y"}),
      [&](Result<bool> r) { completed = r; });
  ASSERT_TRUE(completed.has_value() && completed->has_value() && **completed);
  EXPECT_EQ(cache().size(), 2u);

  const int claims = inner_->claims;
  EXPECT_EQ(claim_async(1).response->body, "x");
  EXPECT_EQ(claim_async(2).response->body, "y");
  EXPECT_EQ(inner_->claims, claims);
  EXPECT_EQ(inner_->inspects, 0);
}

TEST_F(LocalCacheTest, InProgressAndNewKeysAlwaysGoToTheStore) {
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
            ClaimOutcome::kAcquired);
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
            ClaimOutcome::kInProgress);
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(2), t0_),
            ClaimOutcome::kMismatch);
  EXPECT_EQ(inner_->claims, 3);
  EXPECT_EQ(cache().size(), 0u);
}

TEST_F(LocalCacheTest, AnEntryNeverOutlivesItsRecord) {
  // A record ttl (2 s) shorter than the cache's (5 s).
  ASSERT_NO_FATAL_FAILURE(
      Complete(TestId(1), TestFingerprint(1), t0_, "a", seconds(2)));
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_ + seconds(1)),
            ClaimOutcome::kCompleted);
  // Just before expires_at: live. At it: absent, as for the store.
  auto last = cache_->Claim(TestId(1), TestFingerprint(1),
                            t0_ + seconds(2) - Duration(1), kTtl, kLock);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(2), t0_ + seconds(2)),
            ClaimOutcome::kAcquired);
}

TEST_F(LocalCacheTest, ARevokeHereIsSeenAtOnce) {
  ASSERT_NO_FATAL_FAILURE(Complete(TestId(1), TestFingerprint(1), t0_, "a"));
  ASSERT_TRUE(*cache_->Revoke(TestId(1)));
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
            ClaimOutcome::kAcquired);
}

TEST_F(LocalCacheTest, ARevokeElsewhereIsSeenAfterTheCacheTtl) {
  ASSERT_NO_FATAL_FAILURE(Complete(TestId(1), TestFingerprint(1), t0_, "a"));
  ASSERT_TRUE(*inner_->Revoke(TestId(1)));  // idemctl, another instance.
  clock_->Advance(kCacheTtl - Duration(1));
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
            ClaimOutcome::kCompleted);  // The documented window.
  clock_->Advance(Duration(1));
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
            ClaimOutcome::kAcquired);
}

// A revoke that lands after the store answered the fill's claim (or, from
// a store that does not say a replay's expiry, its read) and before the
// fill put the record in: the fill is dropped, nothing replays the revoked
// record.
TEST_F(LocalCacheTest, ARevokeRacingAFillFromTheStoreWins) {
  for (const bool read_back : {false, true}) {
    SCOPED_TRACE(read_back ? "read back" : "from the claim");
    inner_->forget_expiry = read_back;
    auto claim = inner_->Claim(TestId(1), TestFingerprint(1), t0_, kTtl, kLock);
    ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    ASSERT_TRUE(*inner_->Complete(TestId(1), claim->token, Response{}));
    std::function<void()>& hook =
        read_back ? inner_->after_inspect : inner_->after_claim;
    hook = [&] { ASSERT_TRUE(*cache_->Revoke(TestId(1))); };
    EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
              ClaimOutcome::kCompleted);  // Before the revoke: right.
    hook = nullptr;
    EXPECT_EQ(cache().size(), 0u);
    ASSERT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
              ClaimOutcome::kAcquired);
    ASSERT_TRUE(*cache_->Revoke(TestId(1)));  // For the next turn.
  }
}

TEST_F(LocalCacheTest, ARevokeRacingACompletionWins) {
  auto claim = cache_->Claim(TestId(1), TestFingerprint(1), t0_, kTtl, kLock);
  inner_->after_complete = [&] { ASSERT_TRUE(*cache_->Revoke(TestId(1))); };
  ASSERT_TRUE(*cache_->CompleteShared(TestId(1), claim->token,
                                      std::make_shared<const Response>()));
  inner_->after_complete = nullptr;
  EXPECT_EQ(cache().size(), 0u);
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
            ClaimOutcome::kAcquired);
}

TEST_F(LocalCacheTest, ALostClaimsCompletionIsNotCached) {
  auto first = cache_->Claim(TestId(1), TestFingerprint(1), t0_, kTtl, kLock);
  // Its lock times out and another request takes the key over.
  const TimePoint later = t0_ + kLock;
  auto second =
      cache_->Claim(TestId(1), TestFingerprint(1), later, kTtl, kLock);
  ASSERT_EQ(second->outcome, ClaimOutcome::kAcquired);
  EXPECT_FALSE(
      *cache_->Complete(TestId(1), first->token, Response{200, {}, "old"}));
  EXPECT_EQ(cache().size(), 0u);
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), later),
            ClaimOutcome::kInProgress);
  ASSERT_TRUE(
      *cache_->Complete(TestId(1), second->token, Response{200, {}, "new"}));
  auto replay =
      cache_->Claim(TestId(1), TestFingerprint(1), later, kTtl, kLock);
  EXPECT_EQ(replay->response->body, "new");
}

TEST_F(LocalCacheTest, APurgeHereRetiresWhatItDeleted) {
  ASSERT_NO_FATAL_FAILURE(
      Complete(TestId(1), TestFingerprint(1), t0_, "a", seconds(2)));
  ASSERT_EQ(*cache_->PurgeExpired(t0_ + seconds(2), 10), 1u);
  // A claim with an earlier `now` finds no record in the store: neither here.
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_ + seconds(1)),
            ClaimOutcome::kAcquired);
}

TEST_F(LocalCacheTest, TheLeastRecentlyUsedEntryGoesFirst) {
  Open(2);
  for (int i = 1; i <= 2; ++i) {
    ASSERT_NO_FATAL_FAILURE(
        Complete(TestId(i), TestFingerprint(i), t0_, std::to_string(i)));
  }
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
            ClaimOutcome::kCompleted);  // 1 is now the most recent.
  ASSERT_NO_FATAL_FAILURE(Complete(TestId(3), TestFingerprint(3), t0_, "3"));
  EXPECT_EQ(cache().size(), 2u);
  EXPECT_EQ(cache().counters().evictions, 1u);
  const int claims = inner_->claims;
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
            ClaimOutcome::kCompleted);
  EXPECT_EQ(inner_->claims, claims);
  EXPECT_EQ(ClaimAt(TestId(2), TestFingerprint(2), t0_),
            ClaimOutcome::kCompleted);
  EXPECT_EQ(inner_->claims, claims + 1);  // Evicted: from the store.
}

TEST_F(LocalCacheTest, AResponseOverTheByteBudgetIsNotCached) {
  Open(100, 4096);
  ASSERT_NO_FATAL_FAILURE(
      Complete(TestId(1), TestFingerprint(1), t0_, std::string(8192, 'x')));
  EXPECT_EQ(cache().size(), 0u);
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
            ClaimOutcome::kCompleted);  // The store replays it.
}

TEST_F(LocalCacheTest, MetricsCountHitsMissesAndEvictions) {
  auto metrics = std::make_shared<Metrics>();
  Open(1, std::size_t{1} << 20, metrics);  // One entry: a second evicts it.
  ASSERT_NO_FATAL_FAILURE(Complete(TestId(1), TestFingerprint(1), t0_, "a"));
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),
            ClaimOutcome::kCompleted);
  ASSERT_NO_FATAL_FAILURE(Complete(TestId(2), TestFingerprint(1), t0_, "b"));
  EXPECT_EQ(ClaimAt(TestId(1), TestFingerprint(1), t0_),  // Evicted: a miss.
            ClaimOutcome::kCompleted);
  EXPECT_EQ(metrics->Get(CountedEvent::kLocalCacheHit), 1u);
  EXPECT_EQ(metrics->Get(CountedEvent::kLocalCacheMiss), 3u);
  EXPECT_EQ(metrics->Get(CountedEvent::kLocalCacheEviction), 2u);
  const LocalCacheCounters counters = cache().counters();
  EXPECT_EQ(counters.hits, 1u);
  EXPECT_EQ(counters.misses, 3u);
  EXPECT_EQ(counters.evictions, 2u);
  const std::string text = metrics->RenderPrometheus();
  EXPECT_THAT(text, HasSubstr("\nidem_store_local_cache_hits_total 1\n"));
  EXPECT_THAT(text, HasSubstr("\nidem_store_local_cache_misses_total 3\n"));
  EXPECT_THAT(text, HasSubstr("\nidem_store_local_cache_evictions_total 2\n"));
}

// What a remote store's descriptor does: the cache counts into
// StoreOptions::metrics.
TEST(LocalCacheUriTest, OpenWithLocalCacheCountsIntoTheStoreOptionsMetrics) {
  auto uri = StoreUri::Parse("redis://h:1/0?local_cache=10");
  ASSERT_TRUE(uri.has_value());
  auto metrics = std::make_shared<Metrics>();
  auto opened = OpenWithLocalCache(
      *uri, {.metrics = metrics},
      [](StoreUri&, const StoreOptions&) -> Result<std::unique_ptr<Store>> {
        return std::unique_ptr<Store>(std::make_unique<CountingStore>());
      });
  ASSERT_TRUE(opened.has_value()) << opened.error().ToString();
  Store& store = **opened;
  const TimePoint now = SystemClock().Now();
  auto claim = store.Claim(TestId(1), TestFingerprint(1), now, kTtl, kLock);
  ASSERT_TRUE(claim.has_value());
  ASSERT_TRUE(*store.Complete(TestId(1), claim->token, Response{200, {}, ""}));
  auto replay = store.Claim(TestId(1), TestFingerprint(1), now, kTtl, kLock);
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(metrics->Get(CountedEvent::kLocalCacheMiss), 1u);
  EXPECT_EQ(metrics->Get(CountedEvent::kLocalCacheHit), 1u);
}

TEST(LocalCacheUriTest, ParametersAreReadWithTheirRanges) {
  auto read = [](const std::string& query) -> Result<LocalCacheOptions> {
    IDEM_ASSIGN_OR_RETURN(auto uri, StoreUri::Parse("redis://h:1/0?" + query));
    LocalCacheOptions out;
    IDEM_RETURN_IF_ERROR(ReadLocalCacheOptions(uri, out));
    IDEM_RETURN_IF_ERROR(uri.RejectUnknown());
    return out;
  };
  auto on = read("local_cache=1000&local_cache_ttl_s=2&local_cache_mb=8");
  ASSERT_TRUE(on.has_value());
  EXPECT_EQ(on->max_records, 1000u);
  EXPECT_EQ(on->ttl, seconds(2));
  EXPECT_EQ(on->max_bytes, std::size_t{8} << 20);
  auto defaults = read("local_cache=1");
  EXPECT_EQ(defaults->ttl, seconds(5));
  EXPECT_EQ(defaults->max_bytes, std::size_t{64} << 20);
  EXPECT_EQ(read("")->max_records, 0u);
  for (const char* bad :
       {"local_cache=-1", "local_cache=x", "local_cache=16777217",
        "local_cache=1&local_cache_ttl_s=0",
        "local_cache=1&local_cache_ttl_s=3601",
        "local_cache=1&local_cache_mb=0", "local_cache_ttl_s=5",
        "local_cache=0&local_cache_mb=1"}) {
    auto r = read(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.error().message(), HasSubstr("local_cache")) << bad;
  }
}

// The descriptors read them before connecting: a bad value is the URI's
// error, not an unreachable server's.
TEST(LocalCacheUriTest, RemoteSchemesTakeThemBeforeConnecting) {
  for (const char* uri :
       {"redis://127.0.0.1:1/0?local_cache=abc",
        "redis-cluster://127.0.0.1:1,127.0.0.1:2?local_cache_ttl_s=9999",
        "postgresql://u@127.0.0.1:1/db?local_cache=1&local_cache_ttl_s=0"}) {
    auto opened = OpenStore(uri);
    ASSERT_FALSE(opened.has_value()) << uri;
    EXPECT_EQ(opened.error().code(), ErrorCode::kInvalidArgument) << uri;
    EXPECT_THAT(opened.error().message(), HasSubstr("local_cache")) << uri;
  }
  // Not on the embedded stores, which need no cache.
  auto memory = OpenStore("memory:?local_cache=10");
  ASSERT_FALSE(memory.has_value());
  EXPECT_THAT(memory.error().message(),
              HasSubstr("unknown parameter 'local_cache'"));
}

}  // namespace
}  // namespace idem
