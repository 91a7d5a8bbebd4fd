// The background sweeper (sweeper.h) and how OpenStore gives every store
// one. Passes are driven with SweepOnce and a ManualClock; only the tests of
// the thread itself use a short real interval, each bounded by a generous
// wait, never a fixed sleep that must be long enough.

#include "idem/sweeper.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "baseline/sharded_mutex_store.h"
#include "idem/open_store.h"
#include "idem/record_id.h"
#include "idem/types.h"
#include "support/faulty_store.h"

namespace idem {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

RecordId Id(int n) {
  RecordId id;
  id.bytes[0] = static_cast<std::uint8_t>(n);
  id.bytes[1] = static_cast<std::uint8_t>(n >> 8);
  id.bytes[31] = 0x5e;
  return id;
}

Fingerprint Fp() {
  Fingerprint fp;
  fp.bytes[0] = 1;
  return fp;
}

// `expired` records with a 10 s ttl, `live` with a day's, claimed at `now`.
void Fill(Store& store, TimePoint now, int expired, int live) {
  for (int i = 0; i < expired + live; ++i) {
    auto claim = store.Claim(Id(i), Fp(), now,
                             i < expired ? seconds(10) : hours(24), seconds(5));
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  }
}

// Waits up to a minute (a loaded machine) for `done`; true if it came.
template <typename Fn>
bool Eventually(Fn done) {
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

struct Logged {
  std::mutex mu;
  std::vector<std::pair<LogLevel, std::string>> lines;
  LogSink Sink() {
    return [this](LogLevel level, std::string_view message) {
      std::lock_guard<std::mutex> lock(mu);
      lines.emplace_back(level, std::string(message));
    };
  }
};

TEST(SweeperTest, APassDeletesEveryExpiredRecordInBatches) {
  auto clock = std::make_shared<ManualClock>();
  bench::ShardedMutexStore store;
  ASSERT_NO_FATAL_FAILURE(Fill(store, clock->Now(), 10, 3));
  auto sweeper = Sweeper::Start(store, {.interval = Duration::zero(),
                                        .batch = 3,
                                        .max_pass_time = hours(1),
                                        .clock = clock});
  ASSERT_TRUE(sweeper.has_value()) << sweeper.error().ToString();
  clock->Advance(seconds(10));
  auto purged = (*sweeper)->SweepOnce();
  ASSERT_TRUE(purged.has_value()) << purged.error().ToString();
  EXPECT_EQ(*purged, 10u);
  EXPECT_EQ(store.SizeForTesting(), 3u);
  const SweeperStats stats = (*sweeper)->stats();
  EXPECT_EQ(stats.batches, 4u);  // 3, 3, 3, 1.
  EXPECT_EQ(stats.purged, 10u);
  EXPECT_EQ(stats.passes, 1u);
}

TEST(SweeperTest, APassStopsAtItsTimeBoundAndTheNextOneGoesOn) {
  auto clock = std::make_shared<ManualClock>();
  bench::ShardedMutexStore store;
  ASSERT_NO_FATAL_FAILURE(Fill(store, clock->Now(), 10, 0));
  // max_pass_time 0: one batch per pass, whatever is left.
  auto sweeper = Sweeper::Start(store, {.interval = Duration::zero(),
                                        .batch = 4,
                                        .max_pass_time = Duration::zero(),
                                        .clock = clock});
  ASSERT_TRUE(sweeper.has_value());
  clock->Advance(seconds(10));
  EXPECT_EQ((*sweeper)->SweepOnce().value_or(99), 4u);
  EXPECT_EQ((*sweeper)->SweepOnce().value_or(99), 4u);
  EXPECT_EQ((*sweeper)->SweepOnce().value_or(99), 2u);
  EXPECT_EQ((*sweeper)->SweepOnce().value_or(99), 0u);
  EXPECT_EQ(store.SizeForTesting(), 0u);
}

TEST(SweeperTest, AFailedPassIsCountedLoggedAndRetriedByTheNext) {
  auto clock = std::make_shared<ManualClock>();
  auto inner = std::make_shared<bench::ShardedMutexStore>();
  testing::FaultyStore store(inner);
  ASSERT_NO_FATAL_FAILURE(Fill(store, clock->Now(), 5, 0));
  Logged logged;
  auto sweeper = Sweeper::Start(
      store,
      {.interval = Duration::zero(), .clock = clock, .log = logged.Sink()});
  ASSERT_TRUE(sweeper.has_value());
  clock->Advance(seconds(10));
  store.fail_purge = ErrorCode::kUnavailable;
  auto failed = (*sweeper)->SweepOnce();
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ((*sweeper)->stats().errors, 1u);
  {
    std::lock_guard<std::mutex> lock(logged.mu);
    ASSERT_EQ(logged.lines.size(), 1u);
    EXPECT_EQ(logged.lines[0].first, LogLevel::kWarning);
    EXPECT_NE(logged.lines[0].second.find("injected purge failure"),
              std::string::npos)
        << logged.lines[0].second;
    EXPECT_NE(logged.lines[0].second.find("sharded_mutex"), std::string::npos);
  }
  store.fail_purge = std::nullopt;
  EXPECT_EQ((*sweeper)->SweepOnce().value_or(99), 5u);
  EXPECT_EQ(inner->SizeForTesting(), 0u);
}

TEST(SweeperTest, BadOptionsAreInvalidArguments) {
  bench::ShardedMutexStore store;
  for (const SweeperOptions& options :
       {SweeperOptions{.batch = 0}, SweeperOptions{.interval = -seconds(1)},
        SweeperOptions{.max_pass_time = -seconds(1)}}) {
    auto sweeper = Sweeper::Start(store, options);
    ASSERT_FALSE(sweeper.has_value());
    EXPECT_EQ(sweeper.error().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(SweeperTest, TheThreadSweepsEveryIntervalAndKeepsGoingAfterAnError) {
  auto clock = std::make_shared<ManualClock>();
  auto inner = std::make_shared<bench::ShardedMutexStore>();
  testing::FaultyStore store(inner);
  ASSERT_NO_FATAL_FAILURE(Fill(store, clock->Now(), 5, 2));
  clock->Advance(seconds(10));
  store.fail_purge = ErrorCode::kUnavailable;
  auto sweeper =
      Sweeper::Start(store, {.interval = milliseconds(10), .clock = clock});
  ASSERT_TRUE(sweeper.has_value());
  EXPECT_TRUE(Eventually([&] { return (*sweeper)->stats().errors >= 2; }));
  store.fail_purge = std::nullopt;
  EXPECT_TRUE(Eventually([&] { return (*sweeper)->stats().purged == 5; }));
  EXPECT_EQ(inner->SizeForTesting(), 2u);
}

TEST(SweeperTest, DestroyingAnIdleSweeperReturnsAtOnce) {
  bench::ShardedMutexStore store;
  auto sweeper = Sweeper::Start(store, {.interval = hours(1)});
  ASSERT_TRUE(sweeper.has_value());
  const auto start = std::chrono::steady_clock::now();
  sweeper->reset();
  // Not waiting out the hour; generous for a loaded machine.
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(30));
}

TEST(SweeperTest, WithSweeperForwardsAndOwnsTheSweeper) {
  auto clock = std::make_shared<ManualClock>();
  auto raw = std::make_unique<bench::ShardedMutexStore>();
  bench::ShardedMutexStore* inner = raw.get();
  auto store =
      WithSweeper(std::move(raw), {.interval = hours(1), .clock = clock});
  ASSERT_TRUE(store.has_value());
  ASSERT_NE(FindSweeper(**store), nullptr);
  EXPECT_EQ((*store)->Info().name, "sharded_mutex");
  ASSERT_NO_FATAL_FAILURE(Fill(**store, clock->Now(), 2, 1));
  EXPECT_EQ(inner->SizeForTesting(), 3u);
  auto revoked = (*store)->Revoke(Id(2));
  ASSERT_TRUE(revoked.has_value());
  EXPECT_TRUE(*revoked);
  clock->Advance(seconds(10));
  EXPECT_EQ(FindSweeper(**store)->SweepOnce().value_or(99), 2u);
  EXPECT_EQ(inner->SizeForTesting(), 0u);

  auto plain = WithSweeper(std::make_unique<bench::ShardedMutexStore>(),
                           {.interval = Duration::zero()});
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(FindSweeper(**plain), nullptr);
}

// Issue 27 #2: the sweeper's deletions and failed passes are alertable
// series of the Metrics it is given.
TEST(SweeperTest, DeletionsAndErrorsAreCountedInTheMetrics) {
  auto clock = std::make_shared<ManualClock>();
  auto inner = std::make_shared<bench::ShardedMutexStore>();
  testing::FaultyStore store(inner);
  ASSERT_NO_FATAL_FAILURE(Fill(store, clock->Now(), 7, 1));
  auto metrics = std::make_shared<Metrics>();
  auto sweeper = Sweeper::Start(store, {.interval = Duration::zero(),
                                        .batch = 3,
                                        .clock = clock,
                                        .metrics = metrics});
  ASSERT_TRUE(sweeper.has_value());
  clock->Advance(seconds(10));
  store.fail_purge = ErrorCode::kUnavailable;
  EXPECT_FALSE((*sweeper)->SweepOnce().has_value());
  EXPECT_EQ(metrics->Get(CountedEvent::kSweeperError), 1u);
  EXPECT_EQ(metrics->Get(CountedEvent::kSweeperPurged), 0u);
  store.fail_purge = std::nullopt;
  EXPECT_EQ((*sweeper)->SweepOnce().value_or(99), 7u);
  EXPECT_EQ(metrics->Get(CountedEvent::kSweeperPurged), 7u);
  EXPECT_EQ(metrics->Get(CountedEvent::kSweeperError), 1u);
  const std::string text = metrics->RenderPrometheus();
  EXPECT_NE(text.find("\nidem_sweeper_purged_records_total 7\n"),
            std::string::npos);
  EXPECT_NE(text.find("\nidem_sweeper_errors_total 1\n"), std::string::npos);
}

// ---------------------------------------------------------------------------
// OpenStore: every store it opens is swept, by default every 60 s.

TEST(OpenStoreSweeperTest, EveryStoreGetsASweeperOfSixtySecondsByDefault) {
  auto store = OpenStore("memory:");
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  Sweeper* sweeper = FindSweeper(**store);
  ASSERT_NE(sweeper, nullptr);
  EXPECT_EQ(sweeper->options().interval, seconds(60));
  EXPECT_EQ((*store)->Info().name, "memory");
}

TEST(OpenStoreSweeperTest, ZeroTurnsItOffByOptionOrUriParameter) {
  auto by_option = OpenStore("memory:", {.sweep_interval = Duration::zero()});
  ASSERT_TRUE(by_option.has_value());
  EXPECT_EQ(FindSweeper(**by_option), nullptr);
  auto by_uri = OpenStore("memory:?sweep_interval_s=0");
  ASSERT_TRUE(by_uri.has_value()) << by_uri.error().ToString();
  EXPECT_EQ(FindSweeper(**by_uri), nullptr);
  auto uri_wins = OpenStore("memory:?sweep_interval_s=5",
                            {.sweep_interval = Duration::zero()});
  ASSERT_TRUE(uri_wins.has_value());
  ASSERT_NE(FindSweeper(**uri_wins), nullptr);
  EXPECT_EQ(FindSweeper(**uri_wins)->options().interval, seconds(5));
}

TEST(OpenStoreSweeperTest, BadIntervalsAreInvalidArgumentsNamingThem) {
  for (const char* uri :
       {"memory:?sweep_interval_s=86401", "memory:?sweep_interval_s=x",
        "memory:?sweep_interval_s=-1"}) {
    auto store = OpenStore(uri);
    ASSERT_FALSE(store.has_value()) << uri;
    EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(store.error().message().find("sweep_interval_s"),
              std::string::npos)
        << store.error().message();
  }
  auto negative = OpenStore("memory:", {.sweep_interval = -seconds(1)});
  ASSERT_FALSE(negative.has_value());
  EXPECT_EQ(negative.error().code(), ErrorCode::kInvalidArgument);
}

TEST(OpenStoreSweeperTest, TheSweeperCountsIntoStoreOptionsMetrics) {
  auto clock = std::make_shared<ManualClock>();
  auto metrics = std::make_shared<Metrics>();
  auto store = OpenStore(
      "memory:",
      {.clock = clock, .sweep_interval = hours(1), .metrics = metrics});
  ASSERT_TRUE(store.has_value());
  ASSERT_NO_FATAL_FAILURE(Fill(**store, clock->Now(), 3, 1));
  clock->Advance(seconds(10));
  EXPECT_EQ(FindSweeper(**store)->SweepOnce().value_or(99), 3u);
  EXPECT_EQ(metrics->Get(CountedEvent::kSweeperPurged), 3u);
}

TEST(OpenStoreSweeperTest, ExpiredRecordsGoWithoutAnyonePurging) {
  auto clock = std::make_shared<ManualClock>();
  auto store = OpenStore("memory:",
                         {.clock = clock, .sweep_interval = milliseconds(10)});
  ASSERT_TRUE(store.has_value());
  ASSERT_NO_FATAL_FAILURE(Fill(**store, clock->Now(), 4, 2));
  clock->Advance(seconds(10));
  Sweeper* sweeper = FindSweeper(**store);
  ASSERT_NE(sweeper, nullptr);
  EXPECT_TRUE(Eventually([&] { return sweeper->stats().purged == 4; }));
  // The live ones stay, and are still live at the original time too.
  for (int i = 4; i < 6; ++i) {
    auto record = (*store)->Inspect(Id(i), clock->Now());
    ASSERT_TRUE(record.has_value());
    EXPECT_TRUE(record->has_value()) << i;
  }
}

}  // namespace
}  // namespace idem
