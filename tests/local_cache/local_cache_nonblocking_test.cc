// The non-blocking claim path (Store::TryClaimWithoutBlocking,
// Guard::BeginWithoutBlocking) over the local cache in front of a store
// that says its calls block: a hit is answered with no store call and no
// hop; anything else is kCallStore, counted and observed once, by the
// Resume that makes the claim; the cache's answer is exactly what Claim
// would have given (mismatch included), and a revoke here is seen at once.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "counting_store.h"
#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/observer.h"
#include "idem/record_id.h"
#include "idem/store/local_cache.h"

namespace idem {
namespace {

using std::chrono::seconds;

class DecisionLog final : public GuardObserver {
 public:
  void OnDecision(const DecisionEvent& event) override {
    outcomes.push_back(event.outcome);
    routes.emplace_back(event.route);
  }
  std::vector<Outcome> outcomes;
  std::vector<std::string> routes;
};

class NonBlockingClaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto inner = std::make_unique<testing::CountingStore>();
    inner->says_it_blocks = true;
    inner_ = inner.get();
    auto cache = LocalCacheStore::Wrap(std::move(inner),
                                       {.max_records = 100, .clock = clock_});
    ASSERT_TRUE(cache.has_value());
    cache_ = static_cast<LocalCacheStore*>(cache->get());
    store_ = std::shared_ptr<Store>(std::move(*cache));
    GuardSetup setup;
    setup.store = store_;
    setup.clock = clock_;
    setup.metrics = metrics_;
    setup.observers = {log_};
    setup.options.lock_wait = seconds(2);
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard.has_value()) << guard.error().ToString();
    guard_ = std::move(*guard);
  }

  Decision Begin(std::string_view key, std::string_view body) {
    const HeaderView headers[] = {{"Idempotency-Key", key}};
    RequestView request;
    request.method = "POST";
    request.target = "/orders?x=1";
    request.headers = headers;
    request.body = body;
    request.scope = "tenant";
    return guard_->BeginWithoutBlocking(request);
  }

  // A request that runs and completes with 201, through the kCallStore
  // path.
  void Complete(std::string_view key, std::string_view body) {
    Decision d = Begin(key, body);
    ASSERT_EQ(d.action, Action::kCallStore);
    d = guard_->Resume(std::move(d));
    ASSERT_EQ(d.action, Action::kExecute);
    ASSERT_EQ(d.claim.Finish(Response{201, {}, "made"}), FinishResult::kStored);
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Metrics> metrics_ = std::make_shared<Metrics>();
  std::shared_ptr<DecisionLog> log_ = std::make_shared<DecisionLog>();
  testing::CountingStore* inner_ = nullptr;
  LocalCacheStore* cache_ = nullptr;
  std::shared_ptr<Store> store_;
  std::unique_ptr<Guard> guard_;
};

TEST_F(NonBlockingClaimTest, ANewKeyNeedsTheStoreAndIsCountedOnceByResume) {
  Decision d = Begin("k", "{}");
  ASSERT_EQ(d.action, Action::kCallStore);
  EXPECT_EQ(inner_->claims, 0);  // Nothing that blocks was called.
  EXPECT_EQ(metrics_->Get(Outcome::kExecuted), 0u);
  EXPECT_EQ(metrics_->StoreLatencyCount(StoreOperation::kClaim), 0u);
  EXPECT_TRUE(log_->outcomes.empty());

  d = guard_->Resume(std::move(d));
  ASSERT_EQ(d.action, Action::kExecute);
  EXPECT_EQ(inner_->claims, 1);
  EXPECT_EQ(metrics_->Get(Outcome::kExecuted), 1u);
  EXPECT_EQ(metrics_->StoreLatencyCount(StoreOperation::kClaim), 1u);
  // One miss for one claim, though two lookups were made.
  EXPECT_EQ(cache_->counters().misses, 1u);
  EXPECT_EQ(cache_->counters().hits, 0u);
  ASSERT_EQ(d.claim.Finish(Response{201, {}, "made"}), FinishResult::kStored);
  // Observed once, by Resume, with the request's route kept past the
  // Begin call.
  ASSERT_EQ(log_->outcomes.size(), 1u);
  EXPECT_EQ(log_->outcomes[0], Outcome::kExecuted);
  EXPECT_EQ(log_->routes[0], "/orders");
}

TEST_F(NonBlockingClaimTest, ACachedReplayIsAnsweredWithoutTheStore) {
  Complete("k", "{}");
  const int claims = inner_->claims;
  Decision d = Begin("k", "{}");
  ASSERT_EQ(d.action, Action::kRespond);
  EXPECT_EQ(d.outcome, Outcome::kReplayed);
  EXPECT_EQ(d.response.status, 201);
  EXPECT_EQ(d.response.body, "made");
  EXPECT_EQ(inner_->claims, claims);
  EXPECT_EQ(metrics_->Get(Outcome::kReplayed), 1u);
  EXPECT_EQ(cache_->counters().hits, 1u);
  ASSERT_EQ(log_->outcomes.size(), 2u);  // The first request's, and this.
  EXPECT_EQ(log_->outcomes[1], Outcome::kReplayed);
  EXPECT_EQ(log_->routes[1], "/orders");
}

TEST_F(NonBlockingClaimTest, AnotherBodyOnACachedKeyIsAMismatchAtOnce) {
  Complete("k", "{}");
  const int claims = inner_->claims;
  Decision d = Begin("k", "{\"other\":1}");
  ASSERT_EQ(d.action, Action::kRespond);
  EXPECT_EQ(d.outcome, Outcome::kMismatch);
  EXPECT_EQ(d.response.status, 422);
  EXPECT_EQ(inner_->claims, claims);
}

TEST_F(NonBlockingClaimTest, ARevokeHereSendsTheNextClaimToTheStore) {
  Complete("k", "{}");
  ASSERT_TRUE(store_->Revoke(MakeRecordId("tenant", "k")).value());
  Decision d = Begin("k", "{}");
  ASSERT_EQ(d.action, Action::kCallStore);
  d = guard_->Resume(std::move(d));
  EXPECT_EQ(d.action, Action::kExecute);  // Runs again, as after a revoke.
}

TEST_F(NonBlockingClaimTest, AnExpiredEntryIsNoAnswer) {
  Complete("k", "{}");
  clock_->Advance(seconds(6));  // Past the cache's ttl (5 s).
  Decision d = Begin("k", "{}");
  ASSERT_EQ(d.action, Action::kCallStore);
  d = guard_->Resume(std::move(d));
  EXPECT_EQ(d.action, Action::kRespond);
  EXPECT_EQ(d.outcome, Outcome::kReplayed);
}

TEST_F(NonBlockingClaimTest, AnInProgressKeyWaitsAfterTheStoreCall) {
  Decision first = Begin("k", "{}");
  first = guard_->Resume(std::move(first));
  ASSERT_EQ(first.action, Action::kExecute);

  Decision second = Begin("k", "{}");
  ASSERT_EQ(second.action, Action::kCallStore);
  second = guard_->Resume(std::move(second));
  ASSERT_EQ(second.action, Action::kWait);
  ASSERT_EQ(first.claim.Finish(Response{201, {}, "made"}),
            FinishResult::kStored);
  clock_->Advance(second.retry_in);
  second = guard_->Resume(std::move(second));
  ASSERT_EQ(second.action, Action::kRespond);
  EXPECT_EQ(second.outcome, Outcome::kReplayed);
  // The waiting request is observed once, at its end, with its route.
  ASSERT_EQ(log_->outcomes.size(), 2u);  // The first request's, and this.
  EXPECT_EQ(log_->outcomes[1], Outcome::kReplayed);
  EXPECT_EQ(log_->routes[1], "/orders");
  EXPECT_EQ(metrics_->RequestLatencyCount(Outcome::kReplayed), 1u);
}

TEST_F(NonBlockingClaimTest, ResumeReturnsAFinalDecisionAsItIs) {
  Complete("k", "{}");
  Decision d = Begin("k", "{}");
  ASSERT_EQ(d.action, Action::kRespond);
  d = guard_->Resume(std::move(d));
  EXPECT_EQ(d.action, Action::kRespond);
  EXPECT_EQ(metrics_->Get(Outcome::kReplayed), 1u);
}

TEST_F(NonBlockingClaimTest, SwitchedOffNothingIsCalled) {
  guard_->SetEnabled(false);
  Decision d = Begin("k", "{}");
  EXPECT_EQ(d.action, Action::kPassThrough);
  EXPECT_EQ(inner_->claims, 0);
  EXPECT_EQ(inner_->tries, 0);
}

TEST_F(NonBlockingClaimTest, TheCacheAnswersAsClaimWouldOrNotAtAll) {
  const RecordId id = MakeRecordId("tenant", "direct");
  Fingerprint fp;
  Fingerprint other;
  ASSERT_TRUE(fp.Assign(std::string(32, 'a')));
  ASSERT_TRUE(other.Assign(std::string(32, 'b')));
  const TimePoint now = clock_->Now();
  // Unknown: no answer, no effect, no count.
  EXPECT_FALSE(
      store_->TryClaimWithoutBlocking(id, fp, now, seconds(60), seconds(10)));
  EXPECT_EQ(inner_->claims, 0);
  EXPECT_EQ(cache_->counters().misses, 0u);
  auto claim = store_->Claim(id, fp, now, seconds(60), seconds(10));
  ASSERT_TRUE(claim.has_value());
  // In progress: still no answer (claims of live records go to the store).
  EXPECT_FALSE(
      store_->TryClaimWithoutBlocking(id, fp, now, seconds(60), seconds(10)));
  ASSERT_TRUE(
      store_->Complete(id, claim->token, Response{200, {}, "x"}).value());
  auto same =
      store_->TryClaimWithoutBlocking(id, fp, now, seconds(60), seconds(10));
  ASSERT_TRUE(same && same->has_value());
  EXPECT_EQ((*same)->outcome, ClaimOutcome::kCompleted);
  ASSERT_NE((*same)->response, nullptr);
  EXPECT_EQ((*same)->response->body, "x");
  auto mismatch =
      store_->TryClaimWithoutBlocking(id, other, now, seconds(60), seconds(10));
  ASSERT_TRUE(mismatch && mismatch->has_value());
  EXPECT_EQ((*mismatch)->outcome, ClaimOutcome::kMismatch);
  // The boundary's checks apply, as to Claim.
  auto bad = store_->TryClaimWithoutBlocking(id, fp, now, Duration::zero(),
                                             seconds(10));
  ASSERT_TRUE(bad);
  ASSERT_FALSE(bad->has_value());
  EXPECT_EQ(bad->error().code(), ErrorCode::kInvalidArgument);
}

TEST(NonBlockingClaimMemoryTest, AStoreThatNeverBlocksIsClaimedInline) {
  auto store = std::make_shared<testing::CountingStore>();
  GuardSetup setup;
  setup.store = store;
  auto guard = Guard::Create(std::move(setup));
  ASSERT_TRUE(guard.has_value());
  const HeaderView headers[] = {{"Idempotency-Key", "k"}};
  RequestView request;
  request.method = "POST";
  request.target = "/orders";
  request.headers = headers;
  Decision d = (*guard)->BeginWithoutBlocking(request);
  EXPECT_EQ(d.action, Action::kExecute);
  EXPECT_EQ(store->claims, 1);
  EXPECT_EQ(store->tries, 0);
}

}  // namespace
}  // namespace idem
