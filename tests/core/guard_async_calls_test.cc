// The Guard's asynchronous store calls (Guard::StartResume,
// ClaimHandle::StartFinish) on a store whose claims and completions answer
// on a thread of its own: the decision and the finish are exactly what the
// synchronous calls give, counted and observed once, with no synchronous
// claim or completion; what the asynchronous form does not take (a
// release, a store that is not asynchronous) is declined and left to the
// synchronous call. The real stores run through the same calls in the
// contract suite (`*_async` setups) and the HTTP tests.

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/observer.h"
#include "idem/open_store.h"
#include "idem/store/forwarding_store.h"
#include "support/threaded_async_store.h"

namespace idem {
namespace {

using std::chrono::seconds;

class Outcomes final : public GuardObserver {
 public:
  void OnDecision(const DecisionEvent& event) override {
    std::lock_guard<std::mutex> lock(mu);
    decided.push_back(event.outcome);
  }
  void OnFinish(const FinishEvent& event) override {
    std::lock_guard<std::mutex> lock(mu);
    finished.push_back(event.result);
  }
  std::mutex mu;
  std::vector<Outcome> decided;
  std::vector<FinishResult> finished;
};

// Waits (boundedly) for an asynchronous call's `answered`.
class Answered {
 public:
  std::function<void()> Callback() {
    return [this] { promise_.set_value(); };
  }
  bool Wait() {
    return future_.wait_for(seconds(60)) == std::future_status::ready;
  }

 private:
  std::promise<void> promise_;
  std::future<void> future_ = promise_.get_future();
};

class GuardAsyncCallsTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeGuard(store_); }

  void MakeGuard(std::shared_ptr<Store> store,
                 StoreErrorPolicy on_error = StoreErrorPolicy::kFailClosed) {
    GuardSetup setup;
    setup.store = std::move(store);
    setup.clock = clock_;
    setup.metrics = metrics_;
    setup.observers = {outcomes_};
    setup.options.lock_wait = seconds(2);
    setup.options.on_store_error = on_error;
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard.has_value()) << guard.error().ToString();
    guard_ = std::move(*guard);
  }

  Decision Begin(std::string_view key, std::string_view body) {
    const HeaderView headers[] = {{"Idempotency-Key", key}};
    RequestView request;
    request.method = "POST";
    request.target = "/orders";
    request.headers = headers;
    request.body = body;
    request.scope = "tenant";
    return guard_->BeginWithoutBlocking(request);
  }

  // BeginWithoutBlocking, then the asynchronous claim and its decision.
  Decision Decide(std::string_view key, std::string_view body) {
    Decision d = Begin(key, body);
    EXPECT_EQ(d.action, Action::kCallStore);
    Answered answered;
    EXPECT_TRUE(guard_->StartResume(d, answered.Callback()));
    EXPECT_TRUE(answered.Wait());
    return guard_->Resume(std::move(d));
  }

  // The asynchronous completion of `d`'s claim with `response`.
  FinishResult FinishAsync(Decision& d, const Response& response) {
    Answered answered;
    EXPECT_TRUE(d.claim.StartFinish(response, answered.Callback()));
    EXPECT_TRUE(answered.Wait());
    return d.claim.Finish(response);
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<Metrics> metrics_ = std::make_shared<Metrics>();
  std::shared_ptr<Outcomes> outcomes_ = std::make_shared<Outcomes>();
  std::shared_ptr<testing::ThreadedAsyncStore> store_ =
      std::make_shared<testing::ThreadedAsyncStore>();
  std::unique_ptr<Guard> guard_;
};

TEST_F(GuardAsyncCallsTest, TheGuardKnowsTheStoreIsAsynchronous) {
  EXPECT_TRUE(guard_->calls_store_asynchronously());
  MakeGuard(std::shared_ptr<Store>(std::move(*OpenStore("memory:"))));
  EXPECT_FALSE(guard_->calls_store_asynchronously());
}

TEST_F(GuardAsyncCallsTest, AClaimAndItsCompletionMakeNoSynchronousCall) {
  Decision d = Decide("k1", "{}");
  ASSERT_EQ(d.action, Action::kExecute);
  EXPECT_EQ(FinishAsync(d, Response{201, {}, "made"}), FinishResult::kStored);
  EXPECT_EQ(store_->async_claims.load(), 1);
  EXPECT_EQ(store_->async_completes.load(), 1);
  EXPECT_EQ(store_->claims.load(), 0);
  EXPECT_EQ(store_->completes.load(), 0);
  EXPECT_EQ(metrics_->Get(Outcome::kExecuted), 1u);
  EXPECT_EQ(metrics_->StoreLatencyCount(StoreOperation::kClaim), 1u);
  EXPECT_EQ(metrics_->StoreLatencyCount(StoreOperation::kComplete), 1u);
  std::lock_guard<std::mutex> lock(outcomes_->mu);
  EXPECT_EQ(outcomes_->decided, std::vector<Outcome>{Outcome::kExecuted});
  EXPECT_EQ(outcomes_->finished,
            std::vector<FinishResult>{FinishResult::kStored});
}

TEST_F(GuardAsyncCallsTest,
       TheRetryReplaysWhatTheAsynchronousCompletionStored) {
  Decision first = Decide("k1", "{}");
  ASSERT_EQ(first.action, Action::kExecute);
  ASSERT_EQ(FinishAsync(first, Response{201, {}, "made"}),
            FinishResult::kStored);
  Decision retry = Decide("k1", "{}");
  ASSERT_EQ(retry.action, Action::kRespond);
  EXPECT_EQ(retry.outcome, Outcome::kReplayed);
  EXPECT_EQ(retry.response.status, 201);
  EXPECT_EQ(retry.response.body, "made");
  Decision other = Decide("k1", "{\"other\":1}");
  ASSERT_EQ(other.action, Action::kRespond);
  EXPECT_EQ(other.outcome, Outcome::kMismatch);
  EXPECT_EQ(metrics_->Get(Outcome::kExecuted), 1u);
}

TEST_F(GuardAsyncCallsTest, AStatusNotStoredIsDeclinedAndReleasedByFinish) {
  Decision d = Decide("k1", "{}");
  ASSERT_EQ(d.action, Action::kExecute);
  const Response failed{500, {}, "boom"};
  EXPECT_FALSE(d.claim.StartFinish(failed, [] { FAIL() << "not started"; }));
  EXPECT_TRUE(d.claim.active());
  EXPECT_EQ(d.claim.Finish(failed), FinishResult::kReleased);
  EXPECT_EQ(store_->async_completes.load(), 0);
  // Released: the retry runs the handler again.
  Decision retry = Decide("k1", "{}");
  EXPECT_EQ(retry.action, Action::kExecute);
}

TEST_F(GuardAsyncCallsTest, AnInProgressKeyWaitsThroughTheAsynchronousClaim) {
  Decision holder = Decide("k1", "{}");
  ASSERT_EQ(holder.action, Action::kExecute);
  Decision waiting = Decide("k1", "{}");
  ASSERT_EQ(waiting.action, Action::kWait);
  ASSERT_EQ(FinishAsync(holder, Response{201, {}, "made"}),
            FinishResult::kStored);
  Answered answered;
  ASSERT_TRUE(guard_->StartResume(waiting, answered.Callback()));
  ASSERT_TRUE(answered.Wait());
  Decision d = guard_->Resume(std::move(waiting));
  ASSERT_EQ(d.action, Action::kRespond);
  EXPECT_EQ(d.outcome, Outcome::kReplayed);
  EXPECT_EQ(store_->claims.load(), 0);
}

TEST_F(GuardAsyncCallsTest, OtherDecisionsAndSynchronousStoresAreDeclined) {
  Decision answered = Decide("k1", "{}");
  ASSERT_EQ(answered.action, Action::kExecute);
  EXPECT_FALSE(guard_->StartResume(answered, [] { FAIL(); }));
  Decision missing = Begin("", "{}");
  ASSERT_EQ(missing.action, Action::kRespond);
  EXPECT_FALSE(guard_->StartResume(missing, [] { FAIL(); }));
  // Ended before its Guard is replaced below.
  EXPECT_EQ(FinishAsync(answered, Response{201, {}, "x"}),
            FinishResult::kStored);

  // A store that says its calls block but are not asynchronous: Resume,
  // where it may block, makes the claim.
  auto memory = std::shared_ptr<Store>(std::move(*OpenStore("memory:")));
  MakeGuard(std::make_shared<ForwardingStore>(memory));
  Decision d = Begin("k2", "{}");
  ASSERT_EQ(d.action, Action::kExecute);  // Memory never blocks: inline.
  EXPECT_FALSE(d.claim.StartFinish(Response{201, {}, "x"}, [] { FAIL(); }));
  EXPECT_EQ(d.claim.Finish(Response{201, {}, "x"}), FinishResult::kStored);
}

TEST_F(GuardAsyncCallsTest, AnAsynchronousStoreErrorIsTheSameProblem) {
  // The store's claim fails: 503 on a fail-closed route, as for Claim.
  struct Failing final : public ForwardingStore {
    Failing()
        : ForwardingStore(std::make_shared<testing::ThreadedAsyncStore>()) {}
    StoreInfo Info() const override {
      StoreInfo info = ForwardingStore::Info();
      info.calls_may_block = true;
      info.async_calls = true;
      return info;
    }
    void ClaimAsync(const RecordId&, const Fingerprint&, TimePoint, Duration,
                    Duration, StoreCallback<ClaimResult> done) override {
      // Inside the call, as an argument error would be: allowed.
      done(MakeError(ErrorCode::kUnavailable, "server gone"));
    }
  };
  MakeGuard(std::make_shared<Failing>());
  Decision d = Decide("k1", "{}");
  ASSERT_EQ(d.action, Action::kRespond);
  EXPECT_EQ(d.outcome, Outcome::kStoreError);
  EXPECT_EQ(d.response.status, 503);
}

TEST_F(GuardAsyncCallsTest,
       AnAbandonedClaimIsReleasedWhateverItsStartedFinish) {
  Decision d = Decide("k1", "{}");
  ASSERT_EQ(d.action, Action::kExecute);
  store_->Hold();
  ASSERT_TRUE(d.claim.StartFinish(Response{201, {}, "made"}, [] {}));
  d.claim.Abandon();  // Releases now; the completion then finds no claim.
  EXPECT_FALSE(d.claim.active());
  store_->Let();
  // Whichever came first, no retry is left waiting: it runs or replays.
  Decision retry = Decide("k1", "{}");
  EXPECT_TRUE(retry.action == Action::kExecute ||
              retry.outcome == Outcome::kReplayed);
}

// Completes on a thread of its own and notes, when that thread lets go of
// the stored response, how many owners it still has; the record it writes
// is a copy, so the memory store keeps none of them.
class LettingGoStore final : public ForwardingStore {
 public:
  LettingGoStore() : ForwardingStore(std::move(*OpenStore("memory:"))) {}
  ~LettingGoStore() override {
    if (thread_.joinable()) thread_.join();
  }
  StoreInfo Info() const override {
    StoreInfo info = ForwardingStore::Info();
    info.calls_may_block = true;
    info.async_calls = true;
    return info;
  }
  void ClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                  Duration ttl, Duration lock_timeout,
                  StoreCallback<ClaimResult> done) override {
    done(ForwardingStore::Claim(id, fp, now, ttl, lock_timeout));
  }
  void CompleteAsync(const RecordId& id, const Token& token,
                     std::shared_ptr<const Response> response,
                     StoreCallback<bool> done) override {
    seen = response;
    thread_ = std::thread([this, id, token, response = std::move(response),
                           done = std::move(done)]() mutable {
      done(ForwardingStore::Complete(id, token, *response));
      done = nullptr;
      owners_when_let_go = response.use_count();
      response.reset();
      let_go.set_value();
    });
  }
  std::weak_ptr<const Response> seen;
  long owners_when_let_go = 0;
  std::promise<void> let_go;

 private:
  std::thread thread_;
};

TEST_F(GuardAsyncCallsTest, TheStoresThreadIsNotTheLastOwnerOfTheResponse) {
  // The thread that frees the stored form frees blocks the caller's thread
  // allocated; on the store's thread that costs it the allocator's lock,
  // which the caller's thread holds as often as not.
  auto store = std::make_shared<LettingGoStore>();
  MakeGuard(store);
  Decision d = Decide("k1", "{}");
  ASSERT_EQ(d.action, Action::kExecute);
  const Response made{201, {{"Location", "/orders/1"}}, "made"};
  Answered answered;
  ASSERT_TRUE(d.claim.StartFinish(made, answered.Callback()));
  ASSERT_TRUE(answered.Wait());
  ASSERT_EQ(store->let_go.get_future().wait_for(seconds(60)),
            std::future_status::ready);
  EXPECT_GE(store->owners_when_let_go, 2);  // The claim's, besides.
  EXPECT_FALSE(store->seen.expired());
  EXPECT_EQ(d.claim.Finish(made), FinishResult::kStored);
  EXPECT_TRUE(store->seen.expired());  // Freed by Finish, nothing kept.
  EXPECT_EQ(Decide("k1", "{}").outcome, Outcome::kReplayed);
}

}  // namespace
}  // namespace idem
