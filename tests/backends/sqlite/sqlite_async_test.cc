// The SQLite store's asynchronous calls (ClaimAsync, CompleteAsync): what
// the contract suite's one thread cannot see (the writer's WriteAsync under
// them: sqlite_writer_async_test.cc).
//
//  - An asynchronous claim and completion write what the synchronous calls
//    write, and an argument error answers inside the call.
//  - Many threads mixing synchronous and asynchronous calls on shared and
//    distinct keys: one kAcquired per key, every `done` called once.
//  - Behind an application transaction (SqliteTransaction on the writer) an
//    asynchronous call waits, runs when it ends, or fails with kUnavailable
//    after busy_timeout without writing; made from the holding thread it
//    simply queues.
//  - A stream of asynchronous calls does not keep a transaction from
//    beginning.
//  - The destructor answers every queued call before it returns.
//
// Waits are for answers (a condition variable with a generous bound) or
// WaitFor polls for a state another thread reaches (a call queued); the
// one timeout tested is the store's busy_timeout, made short.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "async_answer.h"
#include "idem/sqlite_store.h"
#include "idem/sqlite_transaction.h"
#include "sqlite_store_test_peer.h"
#include "support/ids.h"
#include "support/store_times.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Answer;
using ::testing::HasSubstr;
using testing::kAnswerBound;
using testing::kLock;
using testing::kT0;
using testing::kTtl;
using testing::TestFingerprint;
using testing::TestId;
using testing::WaitFor;

Response Created(const std::string& body) {
  return Response{201, {{"Content-Type", "application/json"}}, body};
}

class SqliteAsyncStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(seconds(60)); }

  void Open(milliseconds busy_timeout) {
    store_.reset();
    auto opened =
        SqliteStore::Open({.path = path(), .busy_timeout = busy_timeout});
    ASSERT_TRUE(opened) << opened.error().ToString();
    store_ = std::move(*opened);
  }
  std::string path() const { return (dir_.path() / "idem.db").string(); }

  void ClaimAsync(std::uint64_t n, Answer<ClaimResult>& answer) {
    store_->ClaimAsync(TestId(n), TestFingerprint(n), kT0, kTtl, kLock,
                       answer.Callback());
  }
  std::optional<Record> Live(std::uint64_t n) {
    auto record = store_->Inspect(TestId(n), kT0);
    EXPECT_TRUE(record) << record.error().ToString();
    return record ? *record : std::nullopt;
  }

  testing::TempDir dir_{"idem-sqlite-async"};
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteAsyncStoreTest, ClaimThenCompleteAsynchronously) {
  EXPECT_TRUE(store_->Info().async_calls);
  Answer<ClaimResult> claim;
  ClaimAsync(1, claim);
  auto claimed = claim.Wait();
  ASSERT_TRUE(claimed.has_value());
  ASSERT_TRUE(*claimed) << claimed->error().ToString();
  ASSERT_EQ((*claimed)->outcome, ClaimOutcome::kAcquired);
  Answer<bool> complete;
  store_->CompleteAsync(TestId(1), (*claimed)->token,
                        std::make_shared<const Response>(Created("{}")),
                        complete.Callback());
  auto completed = complete.Wait();
  ASSERT_TRUE(completed.has_value());
  ASSERT_TRUE(*completed) << completed->error().ToString();
  EXPECT_TRUE(**completed);
  std::optional<Record> record = Live(1);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, RecordState::kCompleted);
  // The synchronous calls see it as theirs.
  auto again = store_->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->outcome, ClaimOutcome::kCompleted);
  ASSERT_NE(again->response, nullptr);
  EXPECT_EQ(again->response->body, "{}");
  EXPECT_EQ(claim.calls(), 1);
  EXPECT_EQ(complete.calls(), 1);
}

TEST_F(SqliteAsyncStoreTest, AnArgumentErrorAnswersInsideTheCall) {
  Answer<ClaimResult> claim;
  store_->ClaimAsync(TestId(1), TestFingerprint(1), kT0, Duration::zero(),
                     kLock, claim.Callback());
  ASSERT_EQ(claim.calls(), 1);  // Before ClaimAsync returned.
  auto result = claim.Wait();
  ASSERT_FALSE(*result);
  EXPECT_EQ(result->error().code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(Live(1).has_value());
}

// Even threads' calls alternate between the synchronous and the
// asynchronous forms, odd threads' the other way round; every other call
// claims one of kShared keys all threads share, the rest keys of their own.
// An asynchronous claim that acquires completes from its `done` (on the
// writer's thread, or a synchronous caller leading a batch).
TEST_F(SqliteAsyncStoreTest, ManyThreadsMixingBothFormsAcquireEachKeyOnce) {
  constexpr int kThreads = 16;
  constexpr int kOps = 200;
  constexpr int kShared = 32;
  constexpr std::uint64_t kOwn = 1000;  // The first key of a thread's own.
  auto key = [](int t, int j) -> std::uint64_t {
    return j % 2 == 0 ? 1 + (j / 2) % kShared : kOwn + t * kOps + j;
  };
  const auto response = std::make_shared<const Response>(Created("ok"));
  std::vector<std::atomic<int>> acquired(kOwn + kThreads * kOps);
  std::vector<std::atomic<int>> claim_calls(kThreads * kOps);
  std::vector<std::atomic<int>> complete_calls(kThreads * kOps);
  std::atomic<int> errors{0};
  std::mutex mu;
  std::condition_variable cv;
  int outstanding = 0;  // Asynchronous calls not answered yet. Guarded by mu.
  auto begin_call = [&] {
    std::lock_guard<std::mutex> lock(mu);
    ++outstanding;
  };
  auto end_call = [&] {
    std::lock_guard<std::mutex> lock(mu);
    if (--outstanding == 0) cv.notify_all();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < kOps; ++j) {
        const std::uint64_t n = key(t, j);
        const int op = t * kOps + j;
        if ((t + j) % 2 == 0) {
          auto claim =
              store_->Claim(TestId(n), TestFingerprint(n), kT0, kTtl, kLock);
          if (!claim) {
            ++errors;
            continue;
          }
          if (claim->outcome != ClaimOutcome::kAcquired) continue;
          ++acquired[n];
          auto done = store_->CompleteShared(TestId(n), claim->token, response);
          if (!done || !*done) ++errors;
          continue;
        }
        begin_call();
        store_->ClaimAsync(
            TestId(n), TestFingerprint(n), kT0, kTtl, kLock,
            [&, n, op](Result<ClaimResult> claim) {
              ++claim_calls[op];
              if (!claim) ++errors;
              if (claim && claim->outcome == ClaimOutcome::kAcquired) {
                ++acquired[n];
                begin_call();
                store_->CompleteAsync(TestId(n), claim->token, response,
                                      [&, op](Result<bool> done) {
                                        ++complete_calls[op];
                                        if (!done || !*done) ++errors;
                                        end_call();
                                      });
              }
              end_call();
            });
      }
    });
  }
  for (auto& t : threads) t.join();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(
        cv.wait_for(lock, kAnswerBound, [&] { return outstanding == 0; }));
  }
  EXPECT_EQ(errors.load(), 0);
  for (int t = 0; t < kThreads; ++t) {
    for (int j = 0; j < kOps; ++j) {
      const std::uint64_t n = key(t, j);
      ASSERT_EQ(acquired[n].load(), 1) << "key " << n;
      std::optional<Record> record = Live(n);
      ASSERT_TRUE(record.has_value()) << "key " << n;
      EXPECT_EQ(record->state, RecordState::kCompleted) << "key " << n;
    }
  }
  store_.reset();  // Any late second answer would come before this returns.
  for (int op = 0; op < kThreads * kOps; ++op) {
    const bool async = (op / kOps + op % kOps) % 2 != 0;
    EXPECT_EQ(claim_calls[op].load(), async ? 1 : 0) << "op " << op;
    EXPECT_LE(complete_calls[op].load(), 1) << "op " << op;
  }
}

// The call is made on the thread that holds the writer: it queues (its
// caller does not wait, so it cannot wait for itself) and runs once the
// transaction ends.
TEST_F(SqliteAsyncStoreTest, AQueuedCallRunsWhenTheTransactionEnds) {
  SqliteTransaction tx(*store_);
  ASSERT_TRUE(tx.Begin());
  Answer<ClaimResult> claim;
  ClaimAsync(1, claim);
  ASSERT_TRUE(
      WaitFor([&] { return SqliteStoreTestPeer::QueuedWrites(*store_) == 1; }));
  EXPECT_EQ(claim.calls(), 0);
  ASSERT_TRUE(tx.Commit());
  auto result = claim.Wait();
  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(*result) << result->error().ToString();
  EXPECT_EQ((*result)->outcome, ClaimOutcome::kAcquired);
}

TEST_F(SqliteAsyncStoreTest, AQueuedCallHeldBeyondBusyTimeoutIsUnavailable) {
  Open(milliseconds(100));
  SqliteTransaction tx(*store_);
  ASSERT_TRUE(tx.Begin());
  Answer<ClaimResult> claim;
  ClaimAsync(1, claim);
  // Answered while the transaction is still open.
  auto result = claim.Wait();
  ASSERT_TRUE(result.has_value());
  ASSERT_FALSE(*result);
  EXPECT_EQ(result->error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(result->error().message(),
              HasSubstr("claim: the store's writer was held by an application "
                        "transaction (SqliteTransaction) for more than "
                        "busy_timeout=100 ms"));
  EXPECT_EQ(SqliteStoreTestPeer::QueuedWrites(*store_), 0u);
  ASSERT_TRUE(tx.Commit());
  EXPECT_FALSE(Live(1).has_value());  // Never run.
  EXPECT_EQ(claim.calls(), 1);
}

// Eight chains of calls, each made by the previous one's `done`, keep the
// writer's queue from ever emptying; a transaction's Begin still gets the
// writer at the end of the batch running (the writer's thread leaves it to
// a waiting Hold) instead of after the stream (bounded by kBound claims).
TEST_F(SqliteAsyncStoreTest, ATransactionBeginsDuringAStreamOfCalls) {
  constexpr int kChains = 8;
  constexpr std::uint64_t kBound = 1'000'000;
  std::atomic<std::uint64_t> next{1};
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::mutex mu;
  std::condition_variable cv;
  int running = kChains;  // Guarded by mu.
  std::function<void()> claim_next = [&] {
    const std::uint64_t n = next.fetch_add(1);
    if (stop.load() || n > kBound) {
      std::lock_guard<std::mutex> lock(mu);
      --running;
      cv.notify_all();
      return;
    }
    store_->ClaimAsync(TestId(n), TestFingerprint(n), kT0, kTtl, kLock,
                       [&](Result<ClaimResult> claim) {
                         if (!claim) ++errors;
                         claim_next();
                       });
  };
  for (int i = 0; i < kChains; ++i) claim_next();
  ASSERT_TRUE(WaitFor([&] { return next.load() > 1000; }));
  {
    SqliteTransaction tx(*store_);
    ASSERT_TRUE(tx.Begin());
    EXPECT_LT(next.load(), kBound);  // The stream did not end first.
    ASSERT_TRUE(tx.Commit());
  }
  stop = true;
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kAnswerBound, [&] { return running == 0; }));
  }
  store_.reset();  // Its thread is out of claim_next before it goes.
  EXPECT_EQ(errors.load(), 0);
}

// The first claim waits in the claim hook (on the thread running it) until
// every call was made, so that the store is destroyed with calls queued
// (most of them: the writer's thread goes on meanwhile).
TEST_F(SqliteAsyncStoreTest, TheDestructorAnswersEveryQueuedCall) {
  constexpr int kCalls = 300;
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;  // Guarded by mu.
  bool release = false;  // Guarded by mu.
  SqliteStoreTestPeer::SetClaimAttemptHook(
      *store_, [&](ClaimAttemptPoint point, int) {
        if (point != ClaimAttemptPoint::kBeforeWrite) return;
        std::unique_lock<std::mutex> lock(mu);
        if (entered) return;
        entered = true;
        cv.notify_all();
        cv.wait_for(lock, kAnswerBound, [&] { return release; });
      });
  std::vector<std::unique_ptr<Answer<ClaimResult>>> claims;
  for (int i = 0; i < kCalls; ++i) {
    claims.push_back(std::make_unique<Answer<ClaimResult>>());
    ClaimAsync(1 + i, *claims.back());
  }
  {
    // Every call is queued, or in the batch the hook holds up.
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kAnswerBound, [&] { return entered; }));
    for (auto& claim : claims) ASSERT_EQ(claim->calls(), 0);
    release = true;
  }
  cv.notify_all();
  store_.reset();
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_EQ(claims[i]->calls(), 1) << "call " << i;  // No wait needed.
    auto result = claims[i]->Wait();
    ASSERT_TRUE(*result) << result->error().ToString();
    EXPECT_EQ((*result)->outcome, ClaimOutcome::kAcquired);
  }
}

}  // namespace
}  // namespace idem
