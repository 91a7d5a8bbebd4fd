// Many retries of one request at once (SEMANTICS.md rows 5-7 under load):
// 50 POSTs with one key to a 300 ms handler. The handler must run exactly
// once; one answer is the 201, every other is a replay of the same body or a
// 409 problem with Retry-After; with lock_wait 2 s, only 201 + replays.

#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "http_test_util.h"

namespace idem::testing {
namespace {

constexpr int kRequests = 50;
constexpr char kTarget[] = "/orders?delay_ms=300";
constexpr char kBody[] = R"({"burst":true})";

// Sends kRequests copies of one request, each on its own connection, all at
// once (spacing 0) or `spacing` apart, and returns the answers (nullopt for a
// request that failed at the socket level).
std::vector<std::optional<Response>> Burst(std::uint16_t port,
                                           const std::string& key,
                                           std::chrono::milliseconds spacing) {
  std::vector<std::optional<Response>> answers(kRequests);
  std::vector<std::thread> threads;
  std::latch connected(kRequests);
  std::latch go(1);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRequests; ++i) {
    threads.emplace_back([&, i] {
      std::optional<TestClient> client;
      try {
        client.emplace(port);
      } catch (...) {
      }
      connected.count_down();
      go.wait();
      if (!client) return;
      // The spacing is the load pattern under test, not a synchronization.
      if (spacing.count() > 0)
        std::this_thread::sleep_until(start + i * spacing);
      try {
        answers[i] = client->Send(Post(kTarget, kBody, key));
      } catch (...) {
      }
    });
  }
  connected.wait();
  go.count_down();
  for (auto& t : threads) t.join();
  return answers;
}

struct Tally {
  int created = 0;
  int replays = 0;
  int conflicts = 0;
  std::vector<std::string> unexpected;
};

Tally Check(const std::vector<std::optional<Response>>& answers) {
  Tally tally;
  std::string body;
  for (const auto& a : answers) {
    if (a && a->result_int() == 201 && !IsReplay(*a)) {
      ++tally.created;
      body = a->body();
    }
  }
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const auto& a = answers[i];
    if (!a) {
      tally.unexpected.push_back("#" + std::to_string(i) + ": socket error");
    } else if (a->result_int() == 201 && !IsReplay(*a)) {
      // Counted above.
    } else if (a->result_int() == 201 && IsReplay(*a) && a->body() == body) {
      ++tally.replays;
    } else if (ProblemMismatch(*a, 409, "idempotency_request_in_progress")
                   .empty() &&
               HeaderOf(*a, "Retry-After") == "1") {
      ++tally.conflicts;
    } else {
      tally.unexpected.push_back("#" + std::to_string(i) + ": " +
                                 std::to_string(a->result_int()) + " " +
                                 a->body());
    }
  }
  return tally;
}

void ExpectRetryReplays(std::uint16_t port, const std::string& key,
                        const std::vector<std::optional<Response>>& answers) {
  const Response retry = SendOnce(port, Post(kTarget, kBody, key));
  EXPECT_EQ(retry.result_int(), 201u);
  EXPECT_TRUE(IsReplay(retry));
  for (const auto& a : answers) {
    if (a && a->result_int() == 201 && !IsReplay(*a)) {
      EXPECT_EQ(retry.body(), a->body());
    }
  }
}

// (server, spacing in ms)
class BurstTest
    : public ::testing::TestWithParam<std::tuple<demo::HttpFramework, int>> {
 protected:
  static demo::DemoOptions On(demo::DemoOptions options = {}) {
    options.http = std::get<0>(GetParam());
    return options;
  }
  static int Spacing() { return std::get<1>(GetParam()); }
};

TEST_P(BurstTest, HandlerRunsOnceWithoutLockWait) {
  DemoServer server(On());
  const std::string key = "burst-" + std::to_string(Spacing());
  const auto answers =
      Burst(server.port(), key, std::chrono::milliseconds(Spacing()));
  const Tally tally = Check(answers);
  EXPECT_EQ(server.handler_runs(), 1u);
  EXPECT_EQ(tally.created, 1);
  EXPECT_EQ(tally.created + tally.replays + tally.conflicts, kRequests);
  EXPECT_TRUE(tally.unexpected.empty()) << tally.unexpected.front();
  ExpectRetryReplays(server.port(), key, answers);
  EXPECT_EQ(server.handler_runs(), 1u);
}

TEST_P(BurstTest, LockWaitTurnsConflictsIntoReplays) {
  demo::DemoOptions options;
  options.lock_wait = std::chrono::seconds(2);
  DemoServer server(On(options));
  const std::string key = "burst-wait-" + std::to_string(Spacing());
  const auto answers =
      Burst(server.port(), key, std::chrono::milliseconds(Spacing()));
  const Tally tally = Check(answers);
  EXPECT_EQ(server.handler_runs(), 1u);
  EXPECT_EQ(tally.created, 1);
  EXPECT_EQ(tally.replays, kRequests - 1);
  EXPECT_EQ(tally.conflicts, 0);
  EXPECT_TRUE(tally.unexpected.empty()) << tally.unexpected.front();
  ExpectRetryReplays(server.port(), key, answers);
}

// 0: all at once; 10: one every 10 ms.
INSTANTIATE_TEST_SUITE_P(Spacing, BurstTest,
                         ::testing::Combine(::testing::ValuesIn(HttpServers()),
                                            ::testing::Values(0, 10)),
                         [](const auto& info) {
                           return HttpServerName(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == 0
                                       ? std::string("AllAtOnce")
                                       : std::string("Every10ms"));
                         });

}  // namespace
}  // namespace idem::testing
