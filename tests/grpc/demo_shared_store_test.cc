// idem-grpc-demo processes on durable and shared stores, with a real gRPC
// client:
//  - two processes on one store (a SQLite file, a PostgreSQL table, a
//    Redis key prefix): 50 calls with one key and one request at once,
//    alternating between them, run the handler once (GetStats of both
//    count one run); every other answer is a replay of that order or
//    ABORTED (in progress); afterwards either process replays;
//  - kill -9 of the demo after a completed call, then a demo started again
//    on the same store (RocksDB directory, SQLite file, PostgreSQL table)
//    replays it.
//
// PostgreSQL and Redis: the test servers of scripts/postgres.sh and
// scripts/redis.sh (IDEM_TEST_POSTGRES_URI, IDEM_TEST_REDIS_URI); without
// one those cases skip, and under CI (CI set) fail. Tables and prefixes are
// fresh per test. Waits are bounded with generous deadlines.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "demo_client.h"
#include "support/built_path.h"
#include "support/demo_process.h"
#include "support/temp_dir.h"
#ifdef IDEM_GRPC_DEMO_TEST_POSTGRES
#include "postgres_test_util.h"
#endif
#ifdef IDEM_GRPC_DEMO_TEST_REDIS
#include "redis_test_util.h"
#endif

namespace idem::testing::grpc_demo {
namespace {

using ::grpc::StatusCode;
using proc::DemoProcess;
using proc::ReadFile;

enum class Store { kRocksdb, kSqlite, kPostgres, kRedis };

std::string Name(const ::testing::TestParamInfo<Store>& info) {
  switch (info.param) {
    case Store::kRocksdb:
      return "Rocksdb";
    case Store::kSqlite:
      return "Sqlite";
    case Store::kPostgres:
      return "Postgres";
    case Store::kRedis:
      return "Redis";
  }
  return "Unknown";
}

class GrpcDemoStoreTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    switch (GetParam()) {
      case Store::kRocksdb:
        uri_ = "rocksdb:" + (dir_.path() / "db").string();
        return;
      case Store::kSqlite:
        uri_ = "sqlite:" + (dir_.path() / "idem.db").string();
        return;
      case Store::kPostgres:
#ifdef IDEM_GRPC_DEMO_TEST_POSTGRES
        IDEM_REQUIRE_TEST_POSTGRES();
        table_ = UniquePostgresTable("grpc_demo");
        uri_ = WithParams(PostgresTestUri(), "table=" + table_);
        return;
#else
        GTEST_SKIP() << "this build has no PostgreSQL store";
#endif
      case Store::kRedis:
#ifdef IDEM_GRPC_DEMO_TEST_REDIS
        IDEM_REQUIRE_TEST_REDIS();
        redis_base_ = RedisTestUri();
        redis_prefix_ = UniqueRedisPrefix("grpc-demo");
        uri_ = redis_base_ + "?prefix=" + redis_prefix_;
        return;
#else
        GTEST_SKIP() << "this build has no Redis store";
#endif
    }
  }
  void TearDown() override {
#ifdef IDEM_GRPC_DEMO_TEST_POSTGRES
    if (!table_.empty()) DropPostgresTable(uri_, table_);
#endif
#ifdef IDEM_GRPC_DEMO_TEST_REDIS
    if (!redis_prefix_.empty()) DeleteRedisKeys(redis_base_, redis_prefix_);
#endif
  }

  std::string Logs() const {
    std::string all;
    for (const char* name : {"a.log", "b.log"}) {
      all += ReadFile(dir_.path() / name);
    }
    return all;
  }

  TempDir dir_;
  std::string uri_;
  std::string table_;
  std::string redis_base_, redis_prefix_;
};

class TwoProcessesTest : public GrpcDemoStoreTest {};

TEST_P(TwoProcessesTest, FiftyCallsOfOneKeyRunTheHandlerOnce) {
  DemoProcess a(::idem::testing::BuiltPath(IDEM_GRPC_DEMO_PATH), uri_,
                dir_.path() / "a.log", {"--instance", "a"});
  const std::uint16_t port_a = a.WaitListening();
  ASSERT_NE(port_a, 0) << Logs();
  DemoProcess b(::idem::testing::BuiltPath(IDEM_GRPC_DEMO_PATH), uri_,
                dir_.path() / "b.log", {"--instance", "b"});
  const std::uint16_t port_b = b.WaitListening();
  ASSERT_NE(port_b, 0) << Logs();
  DemoClient clients[2] = {DemoClient(port_a), DemoClient(port_b)};

  constexpr int kCalls = 50;
  const auto request = OrderRequest("burst", 1, /*delay_ms=*/300);
  std::vector<CallResult> answers(kCalls);
  {
    std::latch go(kCalls);
    std::vector<std::thread> threads;
    for (int i = 0; i < kCalls; ++i) {
      threads.emplace_back([&, i] {
        go.arrive_and_wait();
        answers[i] = clients[i % 2].CreateOrder(
            request, {.key = "burst-key", .deadline = std::chrono::minutes(2)});
      });
    }
    for (auto& t : threads) t.join();
  }
  std::optional<CallResult> original;
  int replays = 0;
  int in_progress = 0;
  for (int i = 0; i < kCalls; ++i) {
    const CallResult& r = answers[i];
    SCOPED_TRACE("call " + std::to_string(i) + " to " + (i % 2 ? "b" : "a"));
    if (r.status.error_code() == StatusCode::ABORTED) {
      EXPECT_EQ(r.Trailer("idem-problem"), "idempotency_request_in_progress")
          << Describe(r);
      ++in_progress;
      continue;
    }
    ASSERT_TRUE(r.status.ok()) << Describe(r) << "\n" << Logs();
    if (r.replayed()) {
      ++replays;
      continue;
    }
    ASSERT_FALSE(original.has_value()) << "two calls ran the handler:\n"
                                       << Describe(*original) << "\n"
                                       << Describe(r);
    original = r;
  }
  ASSERT_TRUE(original.has_value()) << "no call ran the handler";
  EXPECT_EQ(1 + replays + in_progress, kCalls);
  for (const CallResult& r : answers) {
    if (r.status.ok()) {
      EXPECT_EQ(r.order.id(), original->order.id());
    }
  }
  EXPECT_EQ(clients[0].HandlerRuns() + clients[1].HandlerRuns(), 1);
  for (DemoClient& client : clients) {
    const CallResult again = client.CreateOrder(request, {.key = "burst-key"});
    ASSERT_TRUE(again.status.ok()) << Describe(again);
    EXPECT_TRUE(again.replayed()) << Describe(again);
    EXPECT_EQ(again.order.id(), original->order.id());
  }
}

INSTANTIATE_TEST_SUITE_P(SharedStores, TwoProcessesTest,
                         ::testing::Values(Store::kSqlite, Store::kPostgres,
                                           Store::kRedis),
                         Name);

class KillAndRestartTest : public GrpcDemoStoreTest {};

TEST_P(KillAndRestartTest, ADemoKilledWithSigkillReplaysAfterRestart) {
  const auto request = OrderRequest("kept", 3);
  std::string id;
  {
    DemoProcess first(::idem::testing::BuiltPath(IDEM_GRPC_DEMO_PATH), uri_,
                      dir_.path() / "a.log", {"--instance", "before"});
    const std::uint16_t port = first.WaitListening();
    ASSERT_NE(port, 0) << Logs();
    DemoClient client(port);
    const CallResult created = client.CreateOrder(request, {.key = "durable"});
    ASSERT_TRUE(created.status.ok()) << Describe(created);
    ASSERT_FALSE(created.replayed());
    id = created.order.id();
    // A stored error status survives as well.
    const CallResult not_found =
        client.CreateOrder(OrderRequest("gone", 1, 0, 5), {.key = "durable-5"});
    ASSERT_EQ(not_found.status.error_code(), StatusCode::NOT_FOUND);
    first.Kill();  // SIGKILL: no shutdown, no flush beyond the store's own.
  }
  DemoProcess second(::idem::testing::BuiltPath(IDEM_GRPC_DEMO_PATH), uri_,
                     dir_.path() / "b.log", {"--instance", "after"});
  const std::uint16_t port = second.WaitListening();
  ASSERT_NE(port, 0) << Logs();
  DemoClient client(port);
  const CallResult replay = client.CreateOrder(request, {.key = "durable"});
  ASSERT_TRUE(replay.status.ok()) << Describe(replay);
  EXPECT_TRUE(replay.replayed()) << Describe(replay);
  EXPECT_EQ(replay.order.id(), id);
  EXPECT_EQ(replay.order.instance(), "before");
  const CallResult not_found =
      client.CreateOrder(OrderRequest("gone", 1, 0, 5), {.key = "durable-5"});
  EXPECT_EQ(not_found.status.error_code(), StatusCode::NOT_FOUND);
  EXPECT_TRUE(not_found.replayed()) << Describe(not_found);
  EXPECT_EQ(client.HandlerRuns(), 0);
}

INSTANTIATE_TEST_SUITE_P(DurableStores, KillAndRestartTest,
                         ::testing::Values(Store::kRocksdb, Store::kSqlite,
                                           Store::kPostgres),
                         Name);

}  // namespace
}  // namespace idem::testing::grpc_demo
