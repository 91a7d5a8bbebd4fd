// LogRateLimiter: repeated messages are aggregated, one line per kind per
// interval with a count and an example, written when the interval ends,
// driven by a ManualClock (the limiter's thread waits on it).

#include "idem/log.h"

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baseline/sharded_mutex_store.h"
#include "idem/guard.h"
#include "support/faulty_store.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::WaitFor;

// Lines the sink got; read them with Lines() or Size() while the limiter's
// thread may write.
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
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mu);
    return lines;
  }
  std::size_t Size() {
    std::lock_guard<std::mutex> lock(mu);
    return lines.size();
  }
  // Waits (bounded) until the sink has `n` lines.
  bool WaitForLines(std::size_t n) {
    return WaitFor([&] { return Size() >= n; });
  }
};

// A Guard with the default log aggregation over a FaultyStore, logging into
// `out`, on a ManualClock.
struct LoggingGuard {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::shared_ptr<testing::FaultyStore> store =
      std::make_shared<testing::FaultyStore>(
          std::make_shared<bench::ShardedMutexStore>());
  Captured out;  // Before guard: its destructor writes pending counts.
  std::unique_ptr<Guard> guard;

  explicit LoggingGuard(GuardOptions options = {}) {
    GuardSetup setup;
    setup.store = store;
    setup.clock = clock;
    setup.options = std::move(options);
    setup.log = out.Sink();
    guard = std::move(Guard::Create(std::move(setup)).value());
  }
};

TEST(LogRateLimiterTest, ShapeStripsNumbersAndIds) {
  EXPECT_EQ(LogRateLimiter::Shape("response of 17 bytes, record 3fa9b2c1d0e4"),
            "response of # bytes, record #");
  EXPECT_EQ(LogRateLimiter::Shape("rocksdb:/tmp/x12/idem failed"),
            "rocksdb:/tmp/x#/idem failed");
  EXPECT_EQ(LogRateLimiter::Shape("store failed: unavailable"),
            "store failed: unavailable");
  // A whole record id too: lines about many records are one kind.
  const std::string id(64, 'a');
  const std::string other = std::string(63, 'a') + "1";
  EXPECT_EQ(LogRateLimiter::Shape("storing failed, record " + id),
            "storing failed, record #");
  EXPECT_EQ(LogRateLimiter::Shape("storing failed, record " + id),
            LogRateLimiter::Shape("storing failed, record " + other));
}

TEST(LogRateLimiterTest, RepeatsInsideTheIntervalAreCountedOnce) {
  auto clock = std::make_shared<ManualClock>();
  Captured out;
  LogRateLimiter limiter(out.Sink(), clock, seconds(10));
  limiter.Log(LogLevel::kError, "store full, record 01");
  for (int i = 2; i <= 100; ++i) {
    limiter.Log(LogLevel::kError, "store full, record " + std::to_string(i));
  }
  ASSERT_EQ(out.Size(), 1u);
  EXPECT_EQ(out.Lines()[0], "error: store full, record 01");
  clock->Advance(seconds(9));
  limiter.Log(LogLevel::kError, "store full, record 7");
  EXPECT_EQ(out.Size(), 1u);
  // The window ends: its count is written then, with the latest message as
  // the example, without waiting for another line.
  clock->Advance(seconds(1));
  ASSERT_TRUE(out.WaitForLines(2));
  EXPECT_EQ(out.Lines()[1],
            "error: store full, record 7 (repeated 100 times in the last "
            "10 s)");
  // Still repeating: the next window counts again, written at its end.
  limiter.Log(LogLevel::kError, "store full, record 9");
  EXPECT_EQ(out.Size(), 2u);
  clock->Advance(seconds(10));
  ASSERT_TRUE(out.WaitForLines(3));
  EXPECT_EQ(out.Lines()[2],
            "error: store full, record 9 (repeated 1 time in the last 10 s)");
}

TEST(LogRateLimiterTest, KindsAreLevelAndShape) {
  auto clock = std::make_shared<ManualClock>();
  Captured out;
  LogRateLimiter limiter(out.Sink(), clock, seconds(10));
  limiter.Log(LogLevel::kError, "claim failed 1");
  limiter.Log(LogLevel::kWarning, "claim failed 1");
  limiter.Log(LogLevel::kError, "complete failed 1");
  limiter.Log(LogLevel::kError, "claim failed 2");
  EXPECT_EQ(out.Size(), 3u);
}

// Issue 28 #12: the summary is written when the interval ends, not at the
// next line of any kind, nor only at Flush or exit.
TEST(LogRateLimiterTest, TheSummaryIsWrittenWhenItsIntervalEnds) {
  auto clock = std::make_shared<ManualClock>();
  Captured out;
  {
    LogRateLimiter limiter(out.Sink(), clock, seconds(10));
    limiter.Log(LogLevel::kError, "a 1");
    limiter.Log(LogLevel::kError, "a 2");
    limiter.Log(LogLevel::kError, "a 3");
    clock->Advance(seconds(9));
    EXPECT_EQ(out.Size(), 1u);
    clock->Advance(seconds(1));
    ASSERT_TRUE(out.WaitForLines(2));  // No other call: the clock drives it.
    EXPECT_EQ(out.Lines()[1], "error: a 3 (repeated 2 times in the last 10 s)");
    // A window that ended with no count closes: the next one is written at
    // once.
    clock->Advance(seconds(10));
    limiter.Log(LogLevel::kError, "a 4");
    ASSERT_EQ(out.Size(), 3u);
    EXPECT_EQ(out.Lines()[2], "error: a 4");
    limiter.Log(LogLevel::kInfo, "b");
    limiter.Log(LogLevel::kInfo, "b");
    limiter.Flush();
    ASSERT_EQ(out.Size(), 5u);
    EXPECT_EQ(out.Lines()[4], "info: b (repeated 1 time in the last 10 s)");
    limiter.Log(LogLevel::kInfo, "b");
  }
  ASSERT_EQ(out.Size(), 6u);  // The destructor flushed.
  EXPECT_THAT(out.Lines()[5], HasSubstr("repeated 1 time"));
}

// A kind repeated without pause: one line per interval, each a summary.
TEST(LogRateLimiterTest, ASteadyStreamGetsOneLinePerInterval) {
  auto clock = std::make_shared<ManualClock>();
  Captured out;
  LogRateLimiter limiter(out.Sink(), clock, seconds(10));
  for (int interval = 0; interval < 5; ++interval) {
    for (int i = 0; i < 10; ++i) {
      limiter.Log(LogLevel::kError, "store failed " + std::to_string(i));
      clock->Advance(std::chrono::milliseconds(900));
    }
    clock->Advance(std::chrono::milliseconds(1000));
    ASSERT_TRUE(out.WaitForLines(static_cast<std::size_t>(interval) + 2));
  }
  const auto lines = out.Lines();
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[1],
            "error: store failed 9 (repeated 9 times in the last "
            "10 s)");
  for (std::size_t i = 2; i < lines.size(); ++i) {
    EXPECT_THAT(lines[i], HasSubstr("(repeated 10 times in the last 10 s)"));
  }
}

// A caller-named kind (the Guard's, for a damaged record): one line per
// record, while the same message's shape would be one kind.
TEST(LogRateLimiterTest, ANamedKindIsItsOwn) {
  auto clock = std::make_shared<ManualClock>();
  Captured out;
  LogRateLimiter limiter(out.Sink(), clock, seconds(10));
  const std::string a(64, 'a');
  const std::string b(64, 'b');
  limiter.Log(LogLevel::kError, "damaged record " + a, "damaged " + a);
  limiter.Log(LogLevel::kError, "damaged record " + b, "damaged " + b);
  limiter.Log(LogLevel::kError, "damaged record " + a, "damaged " + a);
  EXPECT_EQ(out.Size(), 2u);
  limiter.Log(LogLevel::kError, "storing failed, record " + a);
  limiter.Log(LogLevel::kError, "storing failed, record " + b);
  EXPECT_EQ(out.Size(), 3u);
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
  EXPECT_EQ(out.Size(), 5u);
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
    EXPECT_EQ(out.Size(), 1u);
  }
  ASSERT_EQ(out.Size(), 2u);
  EXPECT_THAT(
      out.Lines()[1],
      HasSubstr("(repeated " + std::to_string(kThreads * kPerThread - 1) +
                " times in the last 10 s)"));
}

TEST(LogRateLimiterTest, ZeroIntervalForwardsEverything) {
  Captured out;
  LogRateLimiter limiter(out.Sink(), std::make_shared<ManualClock>(),
                         Duration::zero());
  for (int i = 0; i < 5; ++i) limiter.Log(LogLevel::kError, "same");
  EXPECT_EQ(out.Size(), 5u);
}

// The Guard aggregates by default: a failing store under load logs one line
// per interval, not one per request.
TEST(LogRateLimiterTest, TheGuardAggregatesByDefault) {
  LoggingGuard g;
  g.store->fail_claim = ErrorCode::kUnavailable;
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "k" + std::to_string(i);
    Decision d = g.guard->BeginWithKey("s", key, "op", "in");
    EXPECT_EQ(d.outcome, Outcome::kStoreError);
  }
  EXPECT_EQ(g.out.Size(), 1u);
  g.clock->Advance(seconds(10));
  ASSERT_TRUE(g.out.WaitForLines(2));
  EXPECT_THAT(g.out.Lines()[1], HasSubstr("repeated 999 times"));
}

// Issue 28 #11: messages that name a record (store_failed, "exceeds
// max_stored_response") are one kind whatever the record: one line, then one
// summary with an example record id and the count.
TEST(LogRateLimiterTest, TheGuardAggregatesLinesAboutManyRecords) {
  GuardOptions options;
  options.max_stored_response = 4;
  LoggingGuard g(options);
  g.store->fail_complete = ErrorCode::kUnavailable;
  std::vector<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    Decision d = g.guard->BeginWithKey("s", "k" + std::to_string(i), "op", "");
    ASSERT_EQ(d.action, Action::kExecute);
    ids.push_back(d.claim.record_id().ToHex());
    Response response;
    response.status = 200;
    response.body = i % 2 == 0 ? "ok" : "too long";  // Over 4 bytes: released.
    d.claim.Finish(response);
  }
  // One line per kind: storing failed, and exceeds max_stored_response.
  ASSERT_EQ(g.out.Size(), 2u);
  g.clock->Advance(seconds(10));
  ASSERT_TRUE(g.out.WaitForLines(4));
  const auto lines = g.out.Lines();
  ASSERT_EQ(lines.size(), 4u);
  int summaries = 0;
  for (std::size_t i = 2; i < 4; ++i) {
    EXPECT_THAT(lines[i], HasSubstr("(repeated 49 times in the last 10 s)"));
    // The example: the latest record of its kind.
    if (lines[i].find("storing the response failed") != std::string::npos) {
      EXPECT_THAT(lines[i], HasSubstr("record " + ids[98]));
      ++summaries;
    }
    if (lines[i].find("exceeds max_stored_response") != std::string::npos) {
      EXPECT_THAT(lines[i], HasSubstr("record " + ids[99]));
      ++summaries;
    }
  }
  EXPECT_EQ(summaries, 2);
}

// A damaged record is the one line about a record that stays a kind of its
// own: the operator must revoke each (idemctl revoke --record-id).
TEST(LogRateLimiterTest, EachDamagedRecordKeepsItsLine) {
  LoggingGuard g;
  g.store->fail_claim = ErrorCode::kDataLoss;
  for (int round = 0; round < 3; ++round) {
    for (const char* key : {"a", "b", "c"}) {
      EXPECT_EQ(g.guard->BeginWithKey("s", key, "op", "in").outcome,
                Outcome::kRecordDamaged);
    }
  }
  const auto lines = g.out.Lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0], lines[1]);
  EXPECT_NE(lines[1], lines[2]);
}

}  // namespace
}  // namespace idem
