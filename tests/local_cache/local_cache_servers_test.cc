// The local cache on a real server: two store instances (A and B, two
// processes' worth) on one Redis, Redis Cluster or PostgreSQL test server,
// each with local_cache on and a ManualClock. A revoke through A is seen
// by A at once and by B only once its entry is local_cache_ttl_s old;
// another fingerprint on a key B has cached is a mismatch; an entry ends
// with its record. The servers come from IDEM_TEST_REDIS_URI,
// IDEM_TEST_REDIS_CLUSTER_URI and IDEM_TEST_POSTGRES_URI (skipped without
// one, failed under CI).

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/open_store.h"
#include "idem/store/store_descriptor.h"
#include "idem/store_registry.h"
#include "idem/store_uri.h"
#include "support/ids.h"

namespace idem {
namespace {

using std::chrono::seconds;
using testing::TestFingerprint;
using testing::TestId;

constexpr Duration kTtl = seconds(60);
constexpr Duration kLock = seconds(10);
constexpr Duration kCacheTtl = seconds(5);

struct Server {
  const char* label;
  const char* store;  // The descriptor's name.
  const char* env;
};

class LocalCacheServersTest : public ::testing::TestWithParam<Server> {
 protected:
  void SetUp() override {
    const char* base = std::getenv(GetParam().env);
    if (base == nullptr || *base == '\0') {
      if (std::getenv("CI") != nullptr) FAIL() << GetParam().env << " not set";
      GTEST_SKIP() << GetParam().env << " not set (scripts/test.sh starts "
                   << "the test servers)";
    }
    descriptor_ = FindStoreByName(GetParam().store);
    ASSERT_NE(descriptor_, nullptr);
    // A table or key prefix of this process and test.
    const std::string name =
        "lc" + std::to_string(::getpid()) + "_" +
        std::to_string(std::hash<std::string>()(
                           ::testing::UnitTest::GetInstance()
                               ->current_test_info()
                               ->test_case_name() +
                           std::string(::testing::UnitTest::GetInstance()
                                           ->current_test_info()
                                           ->name())) %
                       1000000);
    uri_ = WithUriParams(
        descriptor_->fresh_uri(base, name),
        "local_cache=100&local_cache_ttl_s=5&acquire_timeout_ms=60000");
    a_ = Open();
    b_ = Open();
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    if (descriptor_ != nullptr && descriptor_->remove != nullptr &&
        !uri_.empty()) {
      descriptor_->remove(uri_);
    }
  }

  std::unique_ptr<Store> Open() {
    auto opened = OpenStore(uri_, {.clock = clock_,
                                   .sweep_interval = Duration::zero(),
                                   .metrics = metrics_});
    EXPECT_TRUE(opened.has_value()) << opened.error().ToString();
    return opened ? std::move(*opened) : nullptr;
  }
  ClaimOutcome ClaimAt(Store& store, int fp, TimePoint now) {
    auto claim = store.Claim(TestId(1), TestFingerprint(fp), now, kTtl, kLock);
    EXPECT_TRUE(claim.has_value()) << claim.error().ToString();
    return claim ? claim->outcome : ClaimOutcome::kInProgress;
  }
  // Claims and completes TestId(1) through A with a record ttl of `ttl`.
  void CompleteThroughA(Duration ttl) {
    auto claim = a_->Claim(TestId(1), TestFingerprint(1), t0_, ttl, kLock);
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    auto done = a_->Complete(TestId(1), claim->token,
                             Response{201, {{"X-A", "1"}}, "from a"});
    ASSERT_TRUE(done.has_value() && *done);
  }

  const StoreDescriptor* descriptor_ = nullptr;
  std::string uri_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  const TimePoint t0_ = clock_->Now();
  // A's and B's (OpenStore passes StoreOptions::metrics to the cache).
  std::shared_ptr<Metrics> metrics_ = std::make_shared<Metrics>();
  std::unique_ptr<Store> a_, b_;
};

TEST_P(LocalCacheServersTest, ARevokeIsSeenHereAtOnceAndElsewhereAfterTheTtl) {
  ASSERT_NO_FATAL_FAILURE(CompleteThroughA(kTtl));
  // B fills from the store; both replay.
  auto replay = b_->Claim(TestId(1), TestFingerprint(1), t0_, kTtl, kLock);
  ASSERT_TRUE(replay.has_value());
  ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(*replay->response, (Response{201, {{"X-A", "1"}}, "from a"}));
  ASSERT_EQ(ClaimAt(*a_, 1, t0_), ClaimOutcome::kCompleted);
  // A's first claim and B's fill went to the store; A's replay did not.
  EXPECT_EQ(metrics_->Get(CountedEvent::kLocalCacheMiss), 2u);
  EXPECT_EQ(metrics_->Get(CountedEvent::kLocalCacheHit), 1u);

  ASSERT_TRUE(*a_->Revoke(TestId(1)));
  // A: at once.
  ASSERT_EQ(ClaimAt(*a_, 1, t0_), ClaimOutcome::kAcquired);
  // B: its entry replays the revoked record until local_cache_ttl_s...
  clock_->Advance(kCacheTtl - Duration(1));
  EXPECT_EQ(ClaimAt(*b_, 1, t0_), ClaimOutcome::kCompleted);
  // ... and no longer: the store has A's new claim.
  clock_->Advance(Duration(1));
  EXPECT_EQ(ClaimAt(*b_, 1, t0_), ClaimOutcome::kInProgress);
}

TEST_P(LocalCacheServersTest, AnotherFingerprintOnACachedKeyIsAMismatch) {
  ASSERT_NO_FATAL_FAILURE(CompleteThroughA(kTtl));
  ASSERT_EQ(ClaimAt(*b_, 1, t0_), ClaimOutcome::kCompleted);
  EXPECT_EQ(ClaimAt(*b_, 2, t0_), ClaimOutcome::kMismatch);
  EXPECT_EQ(ClaimAt(*a_, 2, t0_), ClaimOutcome::kMismatch);
}

TEST_P(LocalCacheServersTest, AnEntryEndsWithItsRecord) {
  // A record ttl (2 s) shorter than local_cache_ttl_s (5 s).
  ASSERT_NO_FATAL_FAILURE(CompleteThroughA(seconds(2)));
  ASSERT_EQ(ClaimAt(*b_, 1, t0_ + seconds(1)), ClaimOutcome::kCompleted);
  EXPECT_EQ(ClaimAt(*a_, 1, t0_ + seconds(2)), ClaimOutcome::kAcquired);
  EXPECT_EQ(ClaimAt(*b_, 1, t0_ + seconds(2)), ClaimOutcome::kInProgress);
}

INSTANTIATE_TEST_SUITE_P(
    Servers, LocalCacheServersTest,
    ::testing::Values(Server{"redis", "redis", "IDEM_TEST_REDIS_URI"},
                      Server{"redis_cluster", "redis",
                             "IDEM_TEST_REDIS_CLUSTER_URI"},
                      Server{"postgres", "postgres", "IDEM_TEST_POSTGRES_URI"}),
    [](const ::testing::TestParamInfo<Server>& info) {
      return std::string(info.param.label);
    });

}  // namespace
}  // namespace idem
