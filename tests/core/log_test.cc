// LogRateLimiter: repeated messages are aggregated, one line per kind per
// interval with a count, driven by a ManualClock.

#include "idem/log.h"

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/guard.h"
#include "support/faulty_store.h"
#include "support/sharded_mutex_store.h"

namespace idem {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

struct Captured {
  std::mutex mu;
  std::vector<std::string> lines;
  LogSink Sink() {
    return [this](LogLevel level, std::string_view message) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(std::string(LogLevelName(level)) + ": " +
                      std::string(message));
    };
  }
};

TEST(LogRateLimiterTest, ShapeStripsNumbersAndIds) {
  EXPECT_EQ(LogRateLimiter::Shape("response of 17 bytes, record 3fa9b2c1d0e4"),
            "response of # bytes, record #");
  EXPECT_EQ(LogRateLimiter::Shape("rocksdb:/tmp/x12/idem failed"),
            "rocksdb:/tmp/x#/idem failed");
  EXPECT_EQ(LogRateLimiter::Shape("store failed: unavailable"),
            "store failed: unavailable");
  const std::string id(64, 'a');
  const std::string other = std::string(63, 'a') + "1";
  EXPECT_NE(LogRateLimiter::Shape("damaged record " + id + " (1)"),
            LogRateLimiter::Shape("damaged record " + other + " (1)"));
}

TEST(LogRateLimiterTest, RepeatsInsideTheIntervalAreCountedOnce) {
  auto clock = std::make_shared<ManualClock>();
  Captured out;
  LogRateLimiter limiter(out.Sink(), clock, seconds(10));
  limiter.Log(LogLevel::kError, "store full, record 01");
  for (int i = 2; i <= 100; ++i) {
    limiter.Log(LogLevel::kError, "store full, record " + std::to_string(i));
  }
  ASSERT_EQ(out.lines.size(), 1u);
  EXPECT_EQ(out.lines[0], "error: store full, record 01");
  clock->Advance(seconds(9));
  limiter.Log(LogLevel::kError, "store full, record 7");
  EXPECT_EQ(out.lines.size(), 1u);
  clock->Advance(seconds(1));
  limiter.Log(LogLevel::kError, "store full, record 8");
  ASSERT_EQ(out.lines.size(), 2u);
  EXPECT_EQ(out.lines[1],
            "error: store full, record 8 (repeated 100 times in the last "
            "10 s)");
  // A fresh window: the next repeat is counted again.
  limiter.Log(LogLevel::kError, "store full, record 9");
  EXPECT_EQ(out.lines.size(), 2u);
}

TEST(LogRateLimiterTest, KindsAreLevelAndShape) {
  auto clock = std::make_shared<ManualClock>();
  Captured out;
  LogRateLimiter limiter(out.Sink(), clock, seconds(10));
  limiter.Log(LogLevel::kError, "claim failed 1");
  limiter.Log(LogLevel::kWarning, "claim failed 1");
  limiter.Log(LogLevel::kError, "complete failed 1");
  limiter.Log(LogLevel::kError, "claim failed 2");
  EXPECT_EQ(out.lines.size(), 3u);
}

TEST(LogRateLimiterTest, ASilentKindGetsItsCountAtTheNextCallFlushOrEnd) {
  auto clock = std::make_shared<ManualClock>();
  Captured out;
  {
    LogRateLimiter limiter(out.Sink(), clock, seconds(10));
    limiter.Log(LogLevel::kError, "a 1");
    limiter.Log(LogLevel::kError, "a 2");
    limiter.Log(LogLevel::kError, "a 3");
    clock->Advance(seconds(10));
    limiter.Log(LogLevel::kInfo, "b");  // Another kind, after a's window.
    ASSERT_EQ(out.lines.size(), 3u);
    EXPECT_EQ(out.lines[1], "info: b");
    EXPECT_EQ(out.lines[2], "error: a 3 (repeated 2 times in the last 10 s)");
    limiter.Log(LogLevel::kInfo, "b");
    limiter.Flush();
    ASSERT_EQ(out.lines.size(), 4u);
    EXPECT_EQ(out.lines[3], "info: b (repeated 1 time in the last 10 s)");
    limiter.Log(LogLevel::kInfo, "b");
  }
  ASSERT_EQ(out.lines.size(), 5u);  // The destructor flushed.
  EXPECT_THAT(out.lines[4], HasSubstr("repeated 1 time"));
}

TEST(LogRateLimiterTest, KindsAreBounded) {
  auto clock = std::make_shared<ManualClock>();
  Captured out;
  LogRateLimiter limiter(out.Sink(), clock, seconds(10), /*max_kinds=*/4);
  // Words without digits are distinct shapes.
  const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon",
                         "zeta",  "eta",  "theta", "iota",  "kappa"};
  for (const char* w : words) limiter.Log(LogLevel::kError, w);
  // Four kinds, then the overflow kind once.
  EXPECT_EQ(out.lines.size(), 5u);
}

TEST(LogRateLimiterTest, ManyThreadsLoseNoCount) {
  auto clock = std::make_shared<ManualClock>();
  Captured out;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  {
    LogRateLimiter limiter(out.Sink(), clock, seconds(10));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          limiter.Log(LogLevel::kError, "store full (" +
                                            std::to_string(t * kPerThread + i) +
                                            " live records)");
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(out.lines.size(), 1u);
  }
  ASSERT_EQ(out.lines.size(), 2u);
  EXPECT_THAT(
      out.lines[1],
      HasSubstr("(repeated " + std::to_string(kThreads * kPerThread - 1) +
                " times in the last 10 s)"));
}

TEST(LogRateLimiterTest, ZeroIntervalForwardsEverything) {
  Captured out;
  LogRateLimiter limiter(out.Sink(), std::make_shared<ManualClock>(),
                         Duration::zero());
  for (int i = 0; i < 5; ++i) limiter.Log(LogLevel::kError, "same");
  EXPECT_EQ(out.lines.size(), 5u);
}

// The Guard aggregates by default: a failing store under load logs one line
// per interval, not one per request.
TEST(LogRateLimiterTest, TheGuardAggregatesByDefault) {
  auto clock = std::make_shared<ManualClock>();
  auto store = std::make_shared<testing::FaultyStore>(
      std::make_shared<testing::ShardedMutexStore>());
  store->fail_claim = ErrorCode::kUnavailable;
  Captured out;
  GuardSetup setup;
  setup.store = store;
  setup.clock = clock;
  setup.log = out.Sink();
  auto guard = Guard::Create(std::move(setup));
  ASSERT_TRUE(guard.has_value());
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "k" + std::to_string(i);
    Decision d = (*guard)->BeginWithKey("s", key, "op", "in");
    EXPECT_EQ(d.outcome, Outcome::kStoreError);
  }
  EXPECT_EQ(out.lines.size(), 1u);
  clock->Advance(seconds(10));
  (*guard)->BeginWithKey("s", "last", "op", "in");
  ASSERT_EQ(out.lines.size(), 2u);
  EXPECT_THAT(out.lines[1], HasSubstr("repeated 999 times"));
}

}  // namespace
}  // namespace idem
