// The Redis store through a server outage, each test on a redis-server of
// its own (PrivateRedis), killed mid-run and started again on its port:
//  - over HTTP (idem-demo in this process) under load from 8 clients,
//    fail-closed: once the server is gone every request is a 503
//    idempotency_store_unavailable problem, in bounded time, and after the
//    restart the same demo serves fresh keys again (the pool reconnects);
//  - through the Guard, fail-open: the failed claim's handler runs
//    unprotected and the store is left alone for store_backoff (a
//    ManualClock moves time), then requests are protected again;
//  - a store opened with connect=lazy while the server is down: 503
//    fail-closed, unprotected fail-open, protected once it listens.
// The restarted server has no persistence: records from before the outage
// are gone, which is what a Redis without AOF or RDB does (STORES.md).

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "http_test_util.h"
#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/store.h"
#include "redis_test_util.h"
#include "support/fail_open_outage.h"
#include "support/faulty_store.h"
#include "support/guard_client.h"
#include "support/private_server_test.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

// Short timeouts, so that the outage shows quickly.
constexpr char kParams[] = "?timeout_ms=1000&acquire_timeout_ms=1000&pool=4";
// Far beyond one failing call (connect 1 s, or acquire 1 s + a call),
// sanitizers and a loaded machine included.
constexpr auto kCallBound = seconds(30);
constexpr char kBody[] = R"({"item":"book"})";

class RedisOutageTest
    : public testing::PrivateServerTest<testing::PrivateRedis> {
 protected:
  RedisOutageTest() : PrivateServerTest("redis-server") {}

  std::shared_ptr<Store> Open() { return OpenOn(server_.uri() + kParams); }
};

TEST_F(RedisOutageTest, UnderLoadFailClosedAnswers503AndTheDemoRecovers) {
  std::shared_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  demo::DemoOptions options;
  options.threads = 2;
  testing::DemoServer demo(options, store);

  constexpr int kClients = 8;
  std::atomic<bool> stop{false};
  std::atomic<int> created{0}, unavailable{0}, other{0};
  std::atomic<int> unavailable_after_stop{0};
  // 0: up; 1: killed (set once Stop returned); 2: restarting (set before
  // Start), so that a request sent and answered in phase 1 saw no server.
  std::atomic<int> phase{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; !stop.load(); ++i) {
        const std::string key =
            "load-" + std::to_string(c) + "-" + std::to_string(i);
        const auto start = std::chrono::steady_clock::now();
        const int sent_in = phase.load();
        const auto r = testing::SendOnce(demo.port(),
                                         testing::Post("/orders", kBody, key));
        EXPECT_LT(std::chrono::steady_clock::now() - start, kCallBound);
        const bool down = sent_in == 1 && phase.load() == 1;
        if (r.result_int() == 201) {
          ++created;
          // A request sent and answered while the server was gone cannot
          // have been stored.
          EXPECT_FALSE(down) << key;
        } else if (testing::ProblemMismatch(
                       r, 503, "idempotency_store_unavailable") == "") {
          ++unavailable;
          if (down) ++unavailable_after_stop;
        } else {
          ++other;
          ADD_FAILURE() << key << ": " << r.result_int() << " " << r.body();
        }
      }
    });
  }
  // Load first, then the outage, while the clients keep sending.
  ASSERT_TRUE(testing::WaitFor([&] { return created.load() >= 50; }));
  ASSERT_TRUE(server_.Stop()) << server_.error();
  phase = 1;
  EXPECT_TRUE(
      testing::WaitFor([&] { return unavailable_after_stop.load() >= 50; }));
  // Back again, same port, same demo and store objects.
  phase = 2;
  ASSERT_TRUE(server_.Start()) << server_.error();
  const int created_before_restart = created.load();
  EXPECT_TRUE(testing::WaitFor(
      [&] { return created.load() >= created_before_restart + 50; }));
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(other.load(), 0);
  // Every 201 ran its handler once; every 503 ran none.
  EXPECT_EQ(demo.handler_runs(), static_cast<std::uint64_t>(created.load()));

  // A key completed after the recovery replays.
  const auto first = testing::SendOnce(
      demo.port(), testing::Post("/orders", kBody, "after-recovery"));
  EXPECT_EQ(first.result_int(), 201u);
  const auto again = testing::SendOnce(
      demo.port(), testing::Post("/orders", kBody, "after-recovery"));
  EXPECT_TRUE(testing::IsReplay(again));
}

TEST_F(RedisOutageTest, FailOpenRunsUnprotectedBacksOffAndRecovers) {
  std::shared_ptr<Store> redis = Open();
  ASSERT_NE(redis, nullptr);
  testing::FailOpenGuard open(redis, FromUnixNanos(0) + hours(1), seconds(10));
  ASSERT_NE(open.guard, nullptr) << open.error;
  testing::GuardClient client{open.guard.get()};
  testing::ExpectFailOpenOutage(
      open, client, kCallBound,
      [&] { ASSERT_TRUE(server_.Stop()) << server_.error(); },
      [&] { ASSERT_TRUE(server_.Start()) << server_.error(); });
}

// connect=lazy while the server is down: the Guard sees kUnavailable, so a
// fail-closed Guard answers 503 without running the handler and a
// fail-open one runs it unprotected; once the server listens the same
// store protects requests.
TEST_F(RedisOutageTest, ALazyStoreWhileDownFailsClosedOrOpensAsConfigured) {
  ASSERT_TRUE(server_.Stop()) << server_.error();
  std::shared_ptr<Store> redis =
      OpenOn(server_.uri() + kParams + std::string("&connect=lazy"));
  ASSERT_NE(redis, nullptr);
  GuardSetup setup;
  setup.store = redis;
  auto closed = Guard::Create(std::move(setup));
  ASSERT_TRUE(closed.has_value()) << closed.error().ToString();
  testing::GuardClient strict{closed->get()};
  EXPECT_EQ(strict.Send("k1").status, 503);
  EXPECT_EQ(strict.runs, 0);

  testing::FailOpenGuard open(redis, FromUnixNanos(0) + hours(1), seconds(10));
  ASSERT_NE(open.guard, nullptr) << open.error;
  testing::GuardClient lenient{open.guard.get()};
  EXPECT_EQ(lenient.Send("k1").status, 201);  // Unprotected.
  EXPECT_EQ(lenient.runs, 1);
  EXPECT_EQ(open.guard->metrics().Get(Outcome::kFailOpen), 1u);

  ASSERT_TRUE(server_.Start()) << server_.error();
  EXPECT_TRUE(
      testing::WaitFor([&] { return strict.Send("k2").status == 201; }));
  EXPECT_EQ(strict.runs, 1);
  const Response replay = strict.Send("k2");
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(strict.runs, 1);
}

}  // namespace
}  // namespace idem
