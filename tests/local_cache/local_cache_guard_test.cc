// The Guard over the local cache: a sealed response replays from memory,
// still sealed in the cache (the cache keeps the stored form, opaque); a
// retry with another body on a cached key is 422 without a store call; a
// revoke through the store lets the next retry run the handler; the cache's
// hits and misses are in the Guard's Prometheus text when they share its
// Metrics.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "counting_store.h"
#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/record_id.h"
#include "idem/response_keys.h"
#include "idem/store/local_cache.h"
#include "support/guard_client.h"

namespace idem {
namespace {

constexpr std::string_view kScope = "tenant-a";
constexpr std::string_view kMarker = "secret-card-token-4111";

class LocalCacheGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto inner = std::make_unique<testing::CountingStore>();
    inner_ = inner.get();
    auto cache = LocalCacheStore::Wrap(
        std::move(inner),
        {.max_records = 100, .clock = clock_, .metrics = metrics_});
    ASSERT_TRUE(cache.has_value());
    store_ = std::shared_ptr<Store>(std::move(*cache));
    auto ring = ResponseKeyRing::Parse("k1:" + std::string(64, 'c'));
    ASSERT_TRUE(ring.has_value());
    GuardSetup setup;
    setup.store = store_;
    setup.clock = clock_;
    setup.metrics = metrics_;
    setup.options.response_keys = *ring;
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard.has_value()) << guard.error().ToString();
    guard_ = std::move(*guard);
  }

  Response Send(const std::string& key, const std::string& body) {
    return idem::testing::PostOrder(
        *guard_, key, body, kScope,
        Response{201,
                 {{"Content-Type", "application/json"}},
                 "{\"token\":\"" + std::string(kMarker) + "\"}"},
        runs_);
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  // The Guard's and the cache's, as OpenStore makes it from
  // StoreOptions::metrics.
  std::shared_ptr<Metrics> metrics_ = std::make_shared<Metrics>();
  testing::CountingStore* inner_ = nullptr;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Guard> guard_;
  int runs_ = 0;
};

TEST_F(LocalCacheGuardTest, ASealedResponseReplaysFromMemoryStillSealed) {
  const Response first = Send("k", "{}");
  ASSERT_EQ(first.status, 201);
  const int claims = inner_->claims;
  const Response replay = Send("k", "{}");
  EXPECT_EQ(replay.status, 201);
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(inner_->claims, claims);  // From memory.
  // The cache holds what the store holds: the sealed form.
  const LocalCacheCounters counters =
      static_cast<LocalCacheStore&>(*store_).counters();
  EXPECT_EQ(counters.hits, 1u);
  auto record = inner_->Inspect(MakeRecordId(kScope, "k"), clock_->Now());
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->response->body.find(kMarker), std::string::npos);
}

TEST_F(LocalCacheGuardTest, AnotherBodyOnACachedKeyIs422WithoutAStoreCall) {
  ASSERT_EQ(Send("k", "{}").status, 201);
  const int claims = inner_->claims;
  EXPECT_EQ(Send("k", "{\"amount\":2}").status, 422);
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(inner_->claims, claims);
}

TEST_F(LocalCacheGuardTest, ARevokeThroughTheStoreRunsTheHandlerAgain) {
  ASSERT_EQ(Send("k", "{}").status, 201);
  ASSERT_EQ(Send("k", "{}").status, 201);
  ASSERT_EQ(runs_, 1);
  ASSERT_TRUE(*store_->Revoke(MakeRecordId(kScope, "k")));
  EXPECT_EQ(Send("k", "{}").status, 201);
  EXPECT_EQ(runs_, 2);
}

TEST_F(LocalCacheGuardTest, HitsAndMissesAreInTheGuardsPrometheusText) {
  ASSERT_EQ(Send("k", "{}").status, 201);  // A miss: a new key.
  ASSERT_EQ(Send("k", "{}").status, 201);  // Hits: replays from memory.
  ASSERT_EQ(Send("k", "{}").status, 201);
  ASSERT_EQ(Send("other", "{}").status, 201);  // A miss.
  EXPECT_EQ(runs_, 2);
  const std::string text = guard_->metrics().RenderPrometheus();
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "# TYPE idem_store_local_cache_hits_total counter\n"
                        "idem_store_local_cache_hits_total 2\n"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "# TYPE idem_store_local_cache_misses_total counter\n"
                        "idem_store_local_cache_misses_total 2\n"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        "\nidem_store_local_cache_evictions_total 0\n"));
  // The same figures as the cache's own counters.
  const LocalCacheCounters counters =
      static_cast<LocalCacheStore&>(*store_).counters();
  EXPECT_EQ(counters.hits, 2u);
  EXPECT_EQ(counters.misses, 2u);
}

}  // namespace
}  // namespace idem
