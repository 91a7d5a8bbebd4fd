// The store contract for the asynchronous calls (Store::ClaimAsync,
// CompleteAsync): each answers exactly once, with what the synchronous
// call would return and its effect, whether the store answers on a thread
// of its own (StoreInfo::async_calls) or inside the call (Store's
// defaults, which every other store runs here). The whole suite also runs
// through them on the `_async` setups (idem/testing/through_async_calls.h).
// Same rules as store_contract.cc.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::AsyncContractAnchor() { return 0; }

namespace {

using contract::Describe;
using contract::ExpectSameResponse;
using contract::kLock;
using contract::kTtl;
using contract::RichResponse;
using contract::TestFp;
using contract::TestId;

// The answers of `n` asynchronous calls, in the order they came, waited
// for at most a minute (a loaded, sanitized machine).
template <typename T>
class Answers {
 public:
  explicit Answers(std::size_t n) : expected_(n) {}
  StoreCallback<T> Callback() {
    return [this](Result<T> result) {
      std::lock_guard<std::mutex> lock(mu_);
      got_.push_back(std::move(result));
      cv_.notify_all();
    };
  }
  // All of them, or fewer when the minute passed.
  std::vector<Result<T>> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::minutes(1),
                 [&] { return got_.size() >= expected_; });
    return got_;
  }
  // No answer beyond the expected ones came meanwhile.
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_.size();
  }

 private:
  const std::size_t expected_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Result<T>> got_;
};

template <typename T>
Result<T> One(Answers<T>& answers) {
  std::vector<Result<T>> got = answers.Wait();
  if (got.size() != 1) {
    return MakeError(ErrorCode::kInternal,
                     "expected one answer, got " + std::to_string(got.size()));
  }
  return std::move(got.front());
}

}  // namespace

TEST_P(StoreContractTest, AsyncClaimAndCompleteAnswerAsTheSynchronousCalls) {
  const TimePoint t0 = Now();
  Answers<ClaimResult> claimed(1);
  store().ClaimAsync(TestId(1), TestFp(1), t0, kTtl, kLock, claimed.Callback());
  ASSERT_OK_AND_ASSIGN(ClaimResult first, One(claimed));
  ASSERT_EQ(first.outcome, ClaimOutcome::kAcquired) << Describe(first);

  Answers<ClaimResult> busy(1);
  store().ClaimAsync(TestId(1), TestFp(1), t0, kTtl, kLock, busy.Callback());
  ASSERT_OK_AND_ASSIGN(ClaimResult in_progress, One(busy));
  EXPECT_EQ(in_progress.outcome, ClaimOutcome::kInProgress)
      << Describe(in_progress);

  const Response response = RichResponse();
  Answers<bool> completed(1);
  store().CompleteAsync(TestId(1), first.token,
                        std::make_shared<const Response>(response),
                        completed.Callback());
  ASSERT_OK_AND_ASSIGN(bool done, One(completed));
  EXPECT_TRUE(done);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, RecordState::kCompleted);

  // A second completion is stale; the replay and the mismatch are Claim's.
  Answers<bool> again(1);
  store().CompleteAsync(TestId(1), first.token,
                        std::make_shared<const Response>(response),
                        again.Callback());
  ASSERT_OK_AND_ASSIGN(bool twice, One(again));
  EXPECT_FALSE(twice);
  Answers<ClaimResult> replay(1);
  store().ClaimAsync(TestId(1), TestFp(1), t0, kTtl, kLock, replay.Callback());
  ASSERT_OK_AND_ASSIGN(ClaimResult replayed, One(replay));
  ASSERT_EQ(replayed.outcome, ClaimOutcome::kCompleted) << Describe(replayed);
  ExpectSameResponse(replayed.response, response);
  Answers<ClaimResult> other(1);
  store().ClaimAsync(TestId(1), TestFp(2), t0, kTtl, kLock, other.Callback());
  ASSERT_OK_AND_ASSIGN(ClaimResult mismatch, One(other));
  EXPECT_EQ(mismatch.outcome, ClaimOutcome::kMismatch) << Describe(mismatch);
}

TEST_P(StoreContractTest, AsyncClaimArgumentErrorsAnswerWithoutAClaim) {
  const TimePoint t0 = Now();
  Answers<ClaimResult> answers(1);
  store().ClaimAsync(TestId(1), TestFp(1), t0, Duration::zero(), kLock,
                     answers.Callback());
  auto result = One(answers);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code(), ErrorCode::kInvalidArgument)
      << result.error().ToString();
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());
}

// Many calls in flight at once, from several threads: one key acquired
// once, distinct keys each acquired, every call answered once.
TEST_P(StoreContractTest, AsyncClaimsInFlightTogetherAcquireEachKeyOnce) {
  const TimePoint t0 = Now();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 16;
  Answers<ClaimResult> shared(kThreads * kPerThread);
  Answers<ClaimResult> distinct(kThreads * kPerThread);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        store().ClaimAsync(TestId(1), TestFp(1), t0, kTtl, kLock,
                           shared.Callback());
        store().ClaimAsync(TestId(100 + t * kPerThread + i), TestFp(1), t0,
                           kTtl, kLock, distinct.Callback());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::vector<Result<ClaimResult>> on_one = shared.Wait();
  std::vector<Result<ClaimResult>> on_many = distinct.Wait();
  ASSERT_EQ(on_one.size(), static_cast<std::size_t>(kThreads * kPerThread));
  ASSERT_EQ(on_many.size(), static_cast<std::size_t>(kThreads * kPerThread));
  int acquired = 0;
  for (const auto& r : on_one) {
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    if (r->outcome == ClaimOutcome::kAcquired) ++acquired;
  }
  EXPECT_EQ(acquired, 1);
  for (const auto& r : on_many) {
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->outcome, ClaimOutcome::kAcquired) << Describe(*r);
  }
  EXPECT_EQ(shared.count(), static_cast<std::size_t>(kThreads * kPerThread));
}

}  // namespace idem::testing
