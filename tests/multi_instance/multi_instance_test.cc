// Two idem-demo processes on one shared store — one PostgreSQL table, one
// SQLite file, one Redis or one Redis Cluster — : the handler of a request runs
// once across both, whichever instance each retry reaches.
//
// 50 POSTs with one Idempotency-Key and one body, alternating between the
// two instances, to a handler that takes 300 ms: first all at once (each
// from its own thread, released together), then again, with a fresh key,
// one every 10 ms. Exactly one answer is the 201 of the handler's run; every
// other one is a replay of that same response or a 409 problem
// (idempotency_request_in_progress); /stats of the two instances together
// count one handler run. Afterwards a retry on either instance is a replay.
//
// The PostgreSQL table is fresh for each test, on the shared test server
// (IDEM_TEST_POSTGRES_URI; without it those tests skip, and under CI fail);
// the SQLite file is fresh in the test's own directory; Redis keys are under
// a fresh prefix, on the shared test server or cluster
// (IDEM_TEST_REDIS_URI, IDEM_TEST_REDIS_CLUSTER_URI; same rule).
// IDEM_DEMO_PATH is set by CMake. Only 127.0.0.1, port 0; waits are bounded
// with generous deadlines (ASan and TSan on a loaded two-core machine).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/built_path.h"
#include "support/demo_http_flags.h"
#include "support/demo_process.h"
#include "support/sqlite_count.h"
#include "support/temp_dir.h"
#ifdef IDEM_MULTI_INSTANCE_POSTGRES
#include "postgres_test_util.h"
#endif
#ifdef IDEM_MULTI_INSTANCE_SQLITE
#endif
#ifdef IDEM_MULTI_INSTANCE_REDIS
#include "redis_test_util.h"
#endif

namespace idem::testing {
namespace {

using proc::DemoProcess;
using proc::Describe;
using proc::HandlerRuns;
using proc::HttpResponse;
using proc::ReadFile;
using proc::Send;

constexpr int kRequests = 50;
constexpr char kTarget[] = "/orders?delay_ms=300";
constexpr char kBody[] = R"({"item":"book","quantity":1})";

enum class Spacing { kAllAtOnce, kTenMsApart };
enum class SharedStore { kPostgres, kSqlite, kRedis, kRedisCluster };

struct Case {
  SharedStore store;
  Spacing spacing;
  std::string http = "beast";  // idem-demo --http
};

class MultiInstanceTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (GetParam().store == SharedStore::kRedis ||
        GetParam().store == SharedStore::kRedisCluster) {
#ifdef IDEM_MULTI_INSTANCE_REDIS
      if (GetParam().store == SharedStore::kRedis) {
        IDEM_REQUIRE_TEST_REDIS();
        redis_base_ = RedisTestUri();
      } else {
        IDEM_REQUIRE_TEST_REDIS_CLUSTER();
        redis_base_ = RedisClusterTestUri();
      }
      redis_prefix_ = UniqueRedisPrefix("multi");
      uri_ = redis_base_ + "?prefix=" + redis_prefix_;
      return;
#else
      GTEST_SKIP() << "this build has no Redis store";
#endif
    }
    if (GetParam().store == SharedStore::kSqlite) {
#ifdef IDEM_MULTI_INSTANCE_SQLITE
      uri_ = "sqlite:" + (dir_.path() / "idem.db").string();
      return;
#else
      GTEST_SKIP() << "this build has no SQLite store";
#endif
    }
#ifdef IDEM_MULTI_INSTANCE_POSTGRES
    IDEM_REQUIRE_TEST_POSTGRES();
    table_ = UniquePostgresTable("multi");
    uri_ = WithParams(PostgresTestUri(), "table=" + table_);
#else
    GTEST_SKIP() << "this build has no PostgreSQL store";
#endif
  }
  void TearDown() override {
#ifdef IDEM_MULTI_INSTANCE_REDIS
    if (!redis_prefix_.empty()) DeleteRedisKeys(redis_base_, redis_prefix_);
#endif
#ifdef IDEM_MULTI_INSTANCE_POSTGRES
    if (!table_.empty()) DropPostgresTable(uri_, table_);
#endif
  }

  Spacing spacing() const { return GetParam().spacing; }

  TempDir dir_;
  std::string table_;
  std::string redis_base_, redis_prefix_;
  std::string uri_;
};

TEST_P(MultiInstanceTest, OneKeyOnTwoInstancesRunsTheHandlerOnce) {
  const auto log_a = dir_.path() / "a.log";
  const auto log_b = dir_.path() / "b.log";
  // The first instance creates the table (or file); the second finds it.
  DemoProcess a(::idem::testing::BuiltPath(IDEM_DEMO_PATH), uri_, log_a,
                {"--instance", "a", "--http", GetParam().http});
  const std::uint16_t port_a = a.WaitListening();
  ASSERT_NE(port_a, 0) << ReadFile(log_a);
  DemoProcess b(::idem::testing::BuiltPath(IDEM_DEMO_PATH), uri_, log_b,
                {"--instance", "b", "--http", GetParam().http});
  const std::uint16_t port_b = b.WaitListening();
  ASSERT_NE(port_b, 0) << ReadFile(log_b);
  const std::uint16_t ports[2] = {port_a, port_b};

  const std::string key =
      spacing() == Spacing::kAllAtOnce ? "multi-at-once" : "multi-10ms-apart";
  std::vector<std::optional<HttpResponse>> answers(kRequests);
  {
    std::latch start(kRequests + 1);
    std::vector<std::thread> threads;
    threads.reserve(kRequests);
    for (int i = 0; i < kRequests; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        if (spacing() == Spacing::kTenMsApart) {
          // Load generation, not a timing assertion: request i leaves about
          // i * 10 ms after the first, whatever the scheduler makes of it.
          std::this_thread::sleep_for(std::chrono::milliseconds(10 * i));
        }
        answers[i] = Send(ports[i % 2], "POST", kTarget, key, kBody,
                          std::chrono::seconds(120));
      });
    }
    start.arrive_and_wait();
    for (auto& t : threads) t.join();
  }

  std::optional<HttpResponse> created;
  int replays = 0;
  int conflicts = 0;
  for (int i = 0; i < kRequests; ++i) {
    SCOPED_TRACE("request " + std::to_string(i) + " to instance " +
                 (i % 2 == 0 ? "a" : "b"));
    const auto& r = answers[i];
    ASSERT_TRUE(r.has_value()) << ReadFile(log_a) << ReadFile(log_b);
    if (r->status == 409) {
      EXPECT_EQ(r->Header("Content-Type"), "application/problem+json");
      EXPECT_NE(r->body.find("idempotency_request_in_progress"),
                std::string::npos)
          << Describe(r);
      ++conflicts;
      continue;
    }
    ASSERT_EQ(r->status, 201) << Describe(r);
    if (r->Header("Idempotent-Replayed") == "true") {
      ++replays;
      continue;
    }
    ASSERT_FALSE(created.has_value()) << "two requests ran the handler:\n"
                                      << Describe(created) << "\n"
                                      << Describe(r);
    created = r;
  }
  ASSERT_TRUE(created.has_value()) << "no request ran the handler";
  EXPECT_EQ(1 + replays + conflicts, kRequests);
  for (const auto& r : answers) {
    if (r->status == 201) {
      EXPECT_EQ(r->body, created->body);
    }
  }
  EXPECT_EQ(HandlerRuns(port_a) + HandlerRuns(port_b), 1);

  // Afterwards, either instance replays it.
  for (const std::uint16_t port : ports) {
    const auto retry = Send(port, "POST", kTarget, key, kBody);
    ASSERT_TRUE(retry.has_value());
    EXPECT_EQ(retry->status, 201) << Describe(retry);
    EXPECT_EQ(retry->Header("Idempotent-Replayed"), "true") << Describe(retry);
    EXPECT_EQ(retry->body, created->body);
  }
  EXPECT_EQ(HandlerRuns(port_a) + HandlerRuns(port_b), 1);
  RecordProperty("replays", replays);
  RecordProperty("conflicts", conflicts);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  static constexpr const char* kNames[] = {"Postgres", "Sqlite", "Redis",
                                           "RedisCluster"};
  return std::string(kNames[static_cast<int>(info.param.store)]) +
         (info.param.spacing == Spacing::kAllAtOnce ? "AllAtOnce"
                                                    : "TenMsApart") +
         "_" + info.param.http;
}

// Every shared store, both spacings, on every server of the demo.
std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const std::string& http : DemoHttpFlags()) {
    for (SharedStore store :
         {SharedStore::kPostgres, SharedStore::kSqlite, SharedStore::kRedis,
          SharedStore::kRedisCluster}) {
      for (Spacing spacing : {Spacing::kAllAtOnce, Spacing::kTenMsApart}) {
        cases.push_back(Case{store, spacing, http});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Stores, MultiInstanceTest,
                         ::testing::ValuesIn(AllCases()), CaseName);

#ifdef IDEM_MULTI_INSTANCE_SQLITE

// Rows in the idem table of a SQLite file, read with a connection of our
// own (the demo keeps the file open: that is allowed); -1 on error.
int CountRows(const std::filesystem::path& file) {
  return static_cast<int>(
      idem::testing::SqliteCountRows(file.string(), "idem_records"));
}

// idem-demo --sweep-interval: with 1 s, a record past its 1 s ttl leaves
// the file by itself; with 0, the same record stays.
TEST(DemoSweepTest, TheSweepIntervalFlagDeletesExpiredRecordsOrNot) {
  TempDir dir;
  const auto swept_db = dir.path() / "swept.db";
  const auto kept_db = dir.path() / "kept.db";
  DemoProcess swept(::idem::testing::BuiltPath(IDEM_DEMO_PATH),
                    "sqlite:" + swept_db.string(), dir.path() / "swept.log",
                    {"--ttl", "1", "--sweep-interval", "1"});
  DemoProcess kept(::idem::testing::BuiltPath(IDEM_DEMO_PATH),
                   "sqlite:" + kept_db.string(), dir.path() / "kept.log",
                   {"--ttl", "1", "--sweep-interval", "0"});
  const std::uint16_t swept_port = swept.WaitListening();
  const std::uint16_t kept_port = kept.WaitListening();
  ASSERT_NE(swept_port, 0) << ReadFile(dir.path() / "swept.log");
  ASSERT_NE(kept_port, 0) << ReadFile(dir.path() / "kept.log");
  for (const std::uint16_t port : {swept_port, kept_port}) {
    const auto r = Send(port, "POST", "/orders", "sweep-me", kBody);
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->status, 201) << Describe(r);
  }
  EXPECT_EQ(CountRows(kept_db), 1);
  EXPECT_TRUE(proc::WaitFor([&] { return CountRows(swept_db) == 0; }))
      << "rows left: " << CountRows(swept_db);
  // Expired as long as the other one, and nobody swept it.
  EXPECT_EQ(CountRows(kept_db), 1);
}

TEST(DemoSweepTest, AnOutOfRangeSweepIntervalIsRefusedNamingTheFlag) {
  for (const char* value : {"-1", "86401", "soon"}) {
    SCOPED_TRACE(value);
    TempDir dir;
    const auto log = dir.path() / "demo.log";
    DemoProcess demo(::idem::testing::BuiltPath(IDEM_DEMO_PATH), "memory:", log,
                     {"--sweep-interval", value});
    EXPECT_EQ(demo.WaitListening(), 0);
    EXPECT_TRUE(proc::WaitFor([&] {
      return ReadFile(log).find("--sweep-interval") != std::string::npos;
    })) << ReadFile(log);
  }
}

#endif  // IDEM_MULTI_INSTANCE_SQLITE

}  // namespace
}  // namespace idem::testing
