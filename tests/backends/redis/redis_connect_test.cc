// The Redis store's connection to its servers over time, each test on
// redis-servers of its own (PrivateRedis): a lazy open while the server is
// down (connect=lazy), a server that fails the checks, authentication at
// Open, the checks made again while serving (an eviction policy turned on
// at run time, a server that persists nothing), a completion whose record
// vanished, and a failover whose endpoint moves to the promoted replica.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "idem/log.h"
#include "idem/open_store.h"
#include "idem/store.h"
#include "redis_store_fixture.h"
#include "redis_test_util.h"
#include "support/wait_for.h"
#include "tcp_forwarder.h"

namespace idem {
namespace {

using std::chrono::seconds;
using testing::Fp;
using testing::Id;
using testing::PrivateRedis;
using testing::RedisRaw;
using testing::WaitFor;

const TimePoint kT0 = testing::kRedisT0;

// The store's log, written from its background thread and from calls: a
// capture under a mutex (tests/support/log_capture.h's is not).
class Logs {
 public:
  LogSink Sink() {
    return [this](LogLevel level, std::string_view message) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(std::string(LogLevelName(level)) + ": " +
                       std::string(message));
    };
  }
  // Lines that contain every one of `parts`.
  int Count(std::initializer_list<std::string_view> parts) const {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const std::string& line : lines_) {
      bool all = true;
      for (std::string_view p : parts) all = all && line.find(p) != line.npos;
      n += all ? 1 : 0;
    }
    return n;
  }
  std::string All() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const std::string& line : lines_) out += line + "\n";
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

Result<std::unique_ptr<Store>> Open(const std::string& uri, Logs& logs) {
  return OpenStore(uri,
                   {.sweep_interval = Duration::zero(), .log = logs.Sink()});
}

Result<ClaimResult> ClaimOf(Store& store, int n) {
  return store.Claim(Id(n), Fp(1), kT0, seconds(100), seconds(10));
}

// The N of "N attempts failed" in a lazy store's error, or -1.
int AttemptsFailed(const Result<ClaimResult>& r) {
  if (r) return -1;
  const std::string& m = r.error().message();
  const std::size_t at = m.find(" attempts failed");
  const std::size_t space = m.rfind(' ', at - 1);
  if (at == std::string::npos || space == std::string::npos) return -1;
  return std::stoi(m.substr(space + 1, at - space - 1));
}

bool IsUnavailable(const Result<ClaimResult>& r, std::string_view says) {
  return !r && r.error().code() == ErrorCode::kUnavailable &&
         r.error().message().find(says) != std::string::npos;
}

// CONFIG SET maxmemory-policy `policy` on `server`.
bool SetPolicy(const PrivateRedis& server, const std::string& policy) {
  return RedisRaw(server.server(),
                  {"CONFIG", "SET", "maxmemory-policy", policy})
             .text == "OK";
}

// The calls the server has served of `command` (INFO commandstats).
long long CallsOf(const PrivateRedis& server, const std::string& command) {
  const std::string stats =
      RedisRaw(server.server(), {"INFO", "commandstats"}).text;
  const std::string field = "cmdstat_" + command + ":calls=";
  const std::size_t at = stats.find(field);
  return at == std::string::npos ? 0
                                 : std::stoll(stats.substr(at + field.size()));
}

// connect=lazy on a port that was bound and then closed: Open succeeds,
// every call is unavailable, one warning is logged for the whole episode
// of failed attempts, and once a server listens there calls succeed.
TEST(RedisConnectTest, ALazyStoreOpensWhileTheServerIsDownAndConnectsLater) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  ASSERT_TRUE(server.Stop());
  Logs logs;
  auto store = Open(server.uri() + "?connect=lazy&timeout_ms=1000", logs);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_FALSE((*store)->Info().durable);  // Not known until connected.
  EXPECT_TRUE(IsUnavailable(ClaimOf(**store, 1), "not connected yet"));
  auto stats = (*store)->Stats(kT0);
  ASSERT_FALSE(stats.has_value());
  EXPECT_EQ(stats.error().code(), ErrorCode::kUnavailable);
  EXPECT_FALSE((*store)->Revoke(Id(1)).has_value());
  // Several attempts fail (the count is in the calls' error), one line.
  EXPECT_TRUE(WaitFor([&] { return AttemptsFailed(ClaimOf(**store, 1)) >= 3; }))
      << ClaimOf(**store, 1).error().ToString();
  EXPECT_EQ(
      logs.Count({"warning: ", "cannot connect", "every call is unavailable"}),
      1)
      << logs.All();

  ASSERT_TRUE(server.Start()) << server.error();
  EXPECT_TRUE(WaitFor([&] { return ClaimOf(**store, 2).has_value(); }))
      << ClaimOf(**store, 2).error().ToString();
  auto claim = ClaimOf(**store, 3);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  EXPECT_TRUE(
      (*store)->Complete(Id(3), claim->token, {.status = 201}).value_or(false));
  EXPECT_EQ(logs.Count({"info: ", "connected after"}), 1) << logs.All();
  EXPECT_EQ(logs.Count({"cannot connect"}), 1) << logs.All();
  // The checks ran on that first connect: PrivateRedis persists nothing.
  EXPECT_EQ(logs.Count({"warning: ", "persists nothing"}), 1) << logs.All();
}

// redis-cluster: takes connect=lazy too: no seed answers (a closed port),
// or the shared cluster, whose slot map is read in the background.
TEST(RedisConnectTest, ALazyClusterStoreOpensAndConnectsInTheBackground) {
  IDEM_REQUIRE_TEST_REDIS_CLUSTER();
  PrivateRedis closed;
  ASSERT_TRUE(closed.Start()) << closed.error();
  ASSERT_TRUE(closed.Stop());
  Logs logs;
  auto down =
      Open("redis-cluster://" + closed.server() + "?connect=lazy", logs);
  ASSERT_TRUE(down.has_value()) << down.error().ToString();
  EXPECT_TRUE(IsUnavailable(ClaimOf(**down, 1), "not connected yet"));

  const std::string prefix = testing::UniqueRedisPrefix("lazy-cluster");
  auto store = Open(
      testing::RedisClusterTestUri() + "?connect=lazy&prefix=" + prefix, logs);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_TRUE(WaitFor([&] { return ClaimOf(**store, 1).has_value(); }))
      << ClaimOf(**store, 1).error().ToString();
  auto claim = ClaimOf(**store, 2);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  store->reset();
  testing::DeleteRedisKeys(testing::RedisClusterTestUri(), prefix);
}

// A lazy store whose server, once reached, fails the checks (an evicting
// policy) stays unavailable, says why in an error line and in the calls'
// errors, and serves once the server is fixed.
TEST(RedisConnectTest, ALazyStoreRefusedByTheChecksStaysUnavailable) {
  PrivateRedis server({"--maxmemory-policy", "allkeys-lru"});
  ASSERT_TRUE(server.Start()) << server.error();
  Logs logs;
  auto store = Open(server.uri() + "?connect=lazy&check_interval_ms=100", logs);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_TRUE(WaitFor([&] {
    return logs.Count({"error: ", "maxmemory-policy allkeys-lru"}) > 0;
  })) << logs.All();
  EXPECT_TRUE(IsUnavailable(ClaimOf(**store, 1), "allkeys-lru"))
      << ClaimOf(**store, 1).error().ToString();
  // Checked again, the refusal is not logged again.
  const long long configs = CallsOf(server, "config|get");
  EXPECT_TRUE(
      WaitFor([&] { return CallsOf(server, "config|get") >= configs + 6; }));
  EXPECT_TRUE(IsUnavailable(ClaimOf(**store, 1), "allkeys-lru"));
  EXPECT_EQ(logs.Count({"error: ", "allkeys-lru"}), 1) << logs.All();

  ASSERT_TRUE(SetPolicy(server, "noeviction"));
  EXPECT_TRUE(WaitFor([&] { return ClaimOf(**store, 1).has_value(); }));
  EXPECT_EQ(logs.Count({"pass the checks again"}), 1) << logs.All();
}

// An evicting policy set while the store serves (issue 28, finding 3:
// handlers ran twice, nothing warned): within the check interval every
// call is unavailable (fail-closed: 503) and an error is logged; the
// store serves again once the policy is noeviction.
TEST(RedisConnectTest, AnEvictingPolicySetAtRunTimeMakesCallsUnavailable) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  Logs logs;
  auto store = Open(server.uri() + "?check_interval_ms=200", logs);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  ASSERT_TRUE(ClaimOf(**store, 1).has_value());
  ASSERT_TRUE(SetPolicy(server, "allkeys-lru"));
  EXPECT_TRUE(WaitFor([&] {
    return IsUnavailable(ClaimOf(**store, 2), "allkeys-lru");
  })) << logs.All();
  EXPECT_EQ(logs.Count({"error: ", "has maxmemory-policy allkeys-lru",
                        "every call is unavailable"}),
            1)
      << logs.All();
  auto complete = (*store)->Complete(Id(1), Token{}, {.status = 201});
  ASSERT_FALSE(complete.has_value());
  EXPECT_EQ(complete.error().code(), ErrorCode::kUnavailable);

  ASSERT_TRUE(SetPolicy(server, "noeviction"));
  EXPECT_TRUE(WaitFor([&] { return ClaimOf(**store, 2).has_value(); }));
}

// Calls from many threads while the policy flips under them and the
// checks move the store between serving and refused: every call either
// succeeds or is kUnavailable (for ThreadSanitizer: Ready beside Apply).
TEST(RedisConnectTest, CallsFromManyThreadsWhileThePolicyFlips) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  Logs logs;
  auto store = Open(server.uri() + "?check_interval_ms=10&pool=4", logs);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  constexpr int kThreads = 8;
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, unavailable{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        auto r = ClaimOf(**store, (t * 7919 + i) % 250);
        if (r) {
          ++ok;
        } else if (r.error().code() == ErrorCode::kUnavailable) {
          ++unavailable;
        } else {
          ++other;
        }
      }
    });
  }
  for (int flip = 0; flip < 6; ++flip) {
    const char* policy = flip % 2 == 0 ? "allkeys-lru" : "noeviction";
    ASSERT_TRUE(SetPolicy(server, policy));
    const int seen = flip % 2 == 0 ? unavailable.load() : ok.load();
    EXPECT_TRUE(WaitFor([&] {
      return (flip % 2 == 0 ? unavailable.load() : ok.load()) > seen + 10;
    })) << policy;
  }
  stop = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_GE(logs.Count({"error: ", "allkeys-lru"}), 3) << logs.All();
  EXPECT_GE(logs.Count({"pass the checks again"}), 3) << logs.All();
}

// allow_eviction=true: checked again all the same, and still serving.
TEST(RedisConnectTest, AllowEvictionKeepsServingAnEvictingPolicy) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  Logs logs;
  auto store =
      Open(server.uri() + "?check_interval_ms=50&allow_eviction=true", logs);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  ASSERT_TRUE(SetPolicy(server, "allkeys-lru"));
  const long long configs = CallsOf(server, "config|get");
  EXPECT_TRUE(
      WaitFor([&] { return CallsOf(server, "config|get") >= configs + 6; }));
  auto claim = ClaimOf(**store, 1);
  EXPECT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(logs.Count({"error: "}), 0) << logs.All();
}

TEST(RedisConnectTest, AServerThatPersistsNothingIsNamedAtOpen) {
  Logs logs;
  {
    PrivateRedis volatile_server;  // --save "" --appendonly no
    ASSERT_TRUE(volatile_server.Start()) << volatile_server.error();
    auto store = Open(volatile_server.uri(), logs);
    ASSERT_TRUE(store.has_value()) << store.error().ToString();
    EXPECT_FALSE((*store)->Info().durable);
    EXPECT_EQ(logs.Count({"warning: ", volatile_server.server(),
                          "persists nothing", "forgets every record"}),
              1)
        << logs.All();
  }
  // Logs of its own: the kernel may give this server the port the first one
  // had, and the first one's warning names that address too.
  Logs aof_logs;
  PrivateRedis aof({"--appendonly", "yes"});
  ASSERT_TRUE(aof.Start()) << aof.error();
  auto store = Open(aof.uri(), aof_logs);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_TRUE((*store)->Info().durable);
  EXPECT_EQ(aof_logs.Count({"persists nothing"}), 0) << aof_logs.All();
}

// Issue 28, finding 4: without the password a requirepass server used to
// open with "CONFIG is disabled?" and then answer 503 forever.
TEST(RedisConnectTest, AuthenticationErrorsFailAnEagerOpenNamingTheCause) {
  constexpr std::string_view kPassword = "s3cret-Pass";
  PrivateRedis server({"--requirepass", std::string(kPassword)});
  ASSERT_TRUE(server.Start()) << server.error();
  const std::string address = server.server();

  Logs logs;
  auto none = Open("redis://" + address + "/0", logs);
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message().find("NOAUTH"), std::string::npos)
      << none.error().ToString();
  EXPECT_NE(none.error().message().find("requires authentication"),
            std::string::npos)
      << none.error().ToString();
  EXPECT_EQ(logs.Count({"CONFIG is disabled"}), 0) << logs.All();

  auto wrong = Open("redis://:wrong-Pass-9@" + address + "/0", logs);
  ASSERT_FALSE(wrong.has_value());
  EXPECT_NE(wrong.error().message().find("WRONGPASS"), std::string::npos)
      << wrong.error().ToString();
  EXPECT_EQ(wrong.error().message().find("wrong-Pass-9"), std::string::npos)
      << wrong.error().ToString();

  auto right =
      Open("redis://:" + std::string(kPassword) + "@" + address + "/0", logs);
  ASSERT_TRUE(right.has_value()) << right.error().ToString();
  EXPECT_TRUE(ClaimOf(**right, 1).has_value());

  // Lazy: the refusal is an error line and the calls' error.
  auto lazy = Open("redis://" + address + "/0?connect=lazy", logs);
  ASSERT_TRUE(lazy.has_value()) << lazy.error().ToString();
  EXPECT_TRUE(WaitFor([&] {
    return logs.Count({"error: ", "NOAUTH"}) > 0;
  })) << logs.All();
  EXPECT_TRUE(IsUnavailable(ClaimOf(**lazy, 2), "NOAUTH"));
  EXPECT_EQ(logs.All().find(kPassword), std::string::npos) << logs.All();
}

// A completion whose record is gone (evicted, or deleted by hand) is
// reported as such, apart from one whose record another claim took over.
TEST(RedisConnectTest, ACompletionFindingItsRecordGoneSaysItVanished) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  Logs logs;
  auto store = Open(server.uri(), logs);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  auto* redis = dynamic_cast<RedisStore*>(store->get());
  ASSERT_NE(redis, nullptr);

  auto gone = ClaimOf(**store, 1);
  ASSERT_TRUE(gone.has_value());
  ASSERT_EQ(RedisRaw(server.server(), {"DEL", redis->KeyOf(Id(1))}).text, "1");
  auto done = (*store)->Complete(Id(1), gone->token, {.status = 201});
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_FALSE(*done);
  EXPECT_EQ(logs.Count({"warning: ", "the record vanished: evicted or deleted",
                        Id(1).ToHex()}),
            1)
      << logs.All();

  // Taken over after its lock timed out: not "vanished".
  auto first = ClaimOf(**store, 2);
  ASSERT_TRUE(first.has_value());
  auto takeover = (*store)->Claim(Id(2), Fp(1), kT0 + seconds(11), seconds(100),
                                  seconds(10));
  ASSERT_TRUE(takeover.has_value() && takeover->takeover);
  auto stale = (*store)->Complete(Id(2), first->token, {.status = 201});
  ASSERT_TRUE(stale.has_value());
  EXPECT_FALSE(*stale);
  EXPECT_EQ(logs.Count({"vanished", Id(2).ToHex()}), 0) << logs.All();
}

// An -OOM and a completion whose record vanished ask for a check at once,
// long before the interval (an hour here): the first finds noeviction, the
// second the evicting policy set meanwhile.
TEST(RedisConnectTest, AnOomOrAVanishedRecordTriggersACheck) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  Logs logs;
  auto store = Open(server.uri() + "?check_interval_ms=3600000", logs);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  auto* redis = dynamic_cast<RedisStore*>(store->get());
  ASSERT_NE(redis, nullptr);
  auto claim = ClaimOf(**store, 1);
  ASSERT_TRUE(claim.has_value());

  const long long configs = CallsOf(server, "config|get");
  ASSERT_EQ(RedisRaw(server.server(), {"CONFIG", "SET", "maxmemory", "1"}).text,
            "OK");
  auto full = ClaimOf(**store, 2);
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_TRUE(
      WaitFor([&] { return CallsOf(server, "config|get") >= configs + 3; }));
  ASSERT_EQ(RedisRaw(server.server(), {"CONFIG", "SET", "maxmemory", "0"}).text,
            "OK");
  EXPECT_TRUE(ClaimOf(**store, 2).has_value());

  ASSERT_TRUE(SetPolicy(server, "allkeys-lru"));
  ASSERT_EQ(RedisRaw(server.server(), {"DEL", redis->KeyOf(Id(1))}).text, "1");
  EXPECT_FALSE(
      (*store)->Complete(Id(1), claim->token, {.status = 201}).value_or(true));
  EXPECT_TRUE(WaitFor([&] {
    return IsUnavailable(ClaimOf(**store, 3), "allkeys-lru");
  })) << logs.All();
}

// A managed Redis's failover: the endpoint the URI names (here a
// forwarder's port, as a DNS name would) moves to the promoted replica
// while the pooled connections still reach the old master, now a replica
// that answers -READONLY. Before connections answering -READONLY were
// closed, the pool kept them and every claim failed (503) until that
// server was a master again; now the first claim after the swap reconnects
// through the endpoint and succeeds on the new master, which has the
// record completed before the swap.
TEST(RedisConnectTest, AFailoverWhoseEndpointMovesIsFollowed) {
  // No 5 s wait before a full sync to the replica.
  PrivateRedis a({"--repl-diskless-sync-delay", "0"});
  PrivateRedis b({"--repl-diskless-sync-delay", "0"});
  ASSERT_TRUE(a.Start()) << a.error();
  ASSERT_TRUE(b.Start()) << b.error();
  const auto port_of = [](const PrivateRedis& s) {
    return std::stoi(s.server().substr(s.server().rfind(':') + 1));
  };
  ASSERT_EQ(RedisRaw(b.server(),
                     {"REPLICAOF", "127.0.0.1", std::to_string(port_of(a))})
                .text,
            "OK");
  testing::TcpForwarder endpoint(port_of(a));
  ASSERT_NE(endpoint.port(), 0);
  Logs logs;
  auto store = Open("redis://127.0.0.1:" + std::to_string(endpoint.port()) +
                        "/0?pool=2&timeout_ms=5000",
                    logs);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  auto before = ClaimOf(**store, 1);
  ASSERT_TRUE(before.has_value()) << before.error().ToString();
  ASSERT_TRUE((*store)
                  ->Complete(Id(1), before->token, {.status = 201})
                  .value_or(false));
  // The replica has it (the swap must lose nothing for the replay below).
  auto* redis = dynamic_cast<RedisStore*>(store->get());
  ASSERT_NE(redis, nullptr);
  // Completed there too, not only claimed.
  const std::string completed =
      RedisRaw(a.server(), {"GET", redis->KeyOf(Id(1))}).text;
  ASSERT_TRUE(WaitFor([&] {
    return RedisRaw(b.server(), {"GET", redis->KeyOf(Id(1))}).text == completed;
  }));

  // The roles swap, and the endpoint follows the new master.
  ASSERT_EQ(RedisRaw(b.server(), {"REPLICAOF", "NO", "ONE"}).text, "OK");
  ASSERT_EQ(RedisRaw(a.server(),
                     {"REPLICAOF", "127.0.0.1", std::to_string(port_of(b))})
                .text,
            "OK");
  endpoint.Retarget(port_of(b));
  const int accepted = endpoint.accepted();
  // Bounded: today's code answered -READONLY here until the test gave up.
  Result<ClaimResult> after = ClaimOf(**store, 2);
  EXPECT_TRUE(WaitFor(
      [&] {
        after = ClaimOf(**store, 2);
        return after.has_value();
      },
      seconds(30)))
      << after.error().ToString();
  EXPECT_GT(endpoint.accepted(), accepted);  // It reconnected.
  EXPECT_EQ(RedisRaw(b.server(), {"EXISTS", redis->KeyOf(Id(2))}).text, "1");
  auto replay = ClaimOf(**store, 1);
  ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
}

}  // namespace
}  // namespace idem
