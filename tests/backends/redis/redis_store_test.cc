// The Redis store on one server: URIs, a renewal elsewhere, NOSCRIPT, what
// reaches the server's data, and, each on a private server (PrivateRedis),
// one write per renewal, replicas, a frozen server and a resent claim, a
// restart mid-run, the eviction policy and -OOM. The layout of the values
// and the claim's races are in redis_record_test.cc.

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/open_store.h"
#include "idem/record_id.h"
#include "idem/redis_store.h"
#include "idem/store.h"
#include "redis_connection.h"
#include "redis_store_fixture.h"
#include "redis_test_util.h"
#include "support/secret_request.h"
#include "support/store_uri_checks.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::seconds;
using testing::Fp;
using testing::Id;
using testing::MustOpen;
using testing::PrivateRedis;
using testing::RedisRaw;
using testing::RedisStoreTest;

const TimePoint kT0 = testing::kRedisT0;

TEST(RedisStoreUriTest, ClusterUrisAreRewrittenForParsing) {
  EXPECT_EQ(RedisStore::ClusterUriForParsing(
                "redis-cluster://u:p@a:1,b:2,c:3?prefix=x"),
            "redis-cluster://u:p@a:1?prefix=x&nodes=b:2,c:3");
  EXPECT_EQ(RedisStore::ClusterUriForParsing("redis-cluster://a:1,b:2"),
            "redis-cluster://a:1?nodes=b:2");
  EXPECT_EQ(RedisStore::ClusterUriForParsing("redis-cluster://a:1/?x=1"),
            "redis-cluster://a:1/?x=1");
  EXPECT_EQ(RedisStore::ClusterUriForParsing("redis://a:1,b:2"),
            "redis://a:1,b:2");
}

TEST(RedisStoreUriTest, BadUrisAreRefusedBeforeConnecting) {
  for (const char* uri : {
           "redis://127.0.0.1:1/0?prefix=a{b",
           "redis://127.0.0.1:1/0?prefix=a}",
           "redis://127.0.0.1:1/0?pool=0",
           "redis://127.0.0.1:1/0?timeout_ms=0",
           "redis://127.0.0.1:1/zero",
           "redis://127.0.0.1:1/0?colour=blue",
           "redis://127.0.0.1:1/0?connect=maybe",
           "redis://127.0.0.1:1/0?connect=",
           "redis://127.0.0.1:1/0?check_interval_ms=5",
           "redis://127.0.0.1:1/0?connect=lazy&check_interval_ms=3600001",
           "redis:///0",
           "redis-cluster://127.0.0.1:1/3",
       }) {
    const Error e = testing::OpenStoreError(uri);
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument)
        << uri << ": " << e.ToString();
  }
}

TEST(RedisStoreUriTest, AnUnreachableServerIsUnavailableWithoutThePassword) {
  auto store = OpenStore("redis://user:hunter2@127.0.0.1:1/0?timeout_ms=2000");
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(store.error().message().find("hunter2"), std::string::npos)
      << store.error().message();
  // Lazy: it opens, and the calls' errors do not say it either.
  auto lazy = OpenStore("redis://user:hunter2@127.0.0.1:1/0?connect=lazy",
                        {.sweep_interval = Duration::zero()});
  ASSERT_TRUE(lazy.has_value()) << lazy.error().ToString();
  auto claim = (*lazy)->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_FALSE(claim.has_value());
  EXPECT_EQ(claim.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(claim.error().message().find("hunter2"), std::string::npos)
      << claim.error().message();
}

// The claiming store remembers the claim's l for Complete; a renewal
// through another store moved it since. The fields must still agree.
TEST_F(RedisStoreTest, ACompleteAfterARenewalElsewhereStaysReadable) {
  auto other = MustOpen(Uri());
  ASSERT_NE(other, nullptr);
  auto claim = store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(claim.has_value());
  const long long pttl =
      std::stoll(RedisRaw(server_, {"PTTL", Key(Id(1))}).text);
  auto renewed =
      other->ExtendLock(Id(1), claim->token, kT0 + seconds(5), seconds(10));
  ASSERT_TRUE(renewed.has_value() && *renewed);
  // The key's TTL is the record's expiry, which a renewal keeps.
  EXPECT_LE(std::stoll(RedisRaw(server_, {"PTTL", Key(Id(1))}).text), pttl);
  auto done = store_->Complete(Id(1), claim->token, Response{.status = 201});
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
  auto replay = other->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
}

TEST_F(RedisStoreTest, ScriptsAreLoadedAgainAfterScriptFlush) {
  auto first = store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(first.has_value());
  ASSERT_EQ(RedisRaw(server_, {"SCRIPT", "FLUSH"}).text, "OK");
  auto second = store_->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(second.has_value()) << second.error().ToString();
  EXPECT_EQ(second->outcome, ClaimOutcome::kAcquired);
  ASSERT_EQ(RedisRaw(server_, {"SCRIPT", "FLUSH"}).text, "OK");
  auto done = store_->Complete(Id(1), first->token, Response{.status = 201});
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
  ASSERT_EQ(RedisRaw(server_, {"SCRIPT", "FLUSH"}).text, "OK");
  auto released = store_->Release(Id(2), second->token);
  ASSERT_TRUE(released.has_value()) << released.error().ToString();
  EXPECT_TRUE(*released);
}

TEST_F(RedisStoreTest, CompleteOfAnotherStoresClaimReadsTheRecordFirst) {
  auto other = MustOpen(Uri());
  ASSERT_NE(other, nullptr);
  auto claim = other->Claim(Id(1), Fp(7), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(claim.has_value());
  auto done = store_->Complete(Id(1), claim->token, Response{.status = 202});
  ASSERT_TRUE(done.value_or(false));
  auto record = store_->Inspect(Id(1), kT0);
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kCompleted);
  EXPECT_EQ((*record)->fingerprint, Fp(7));
  EXPECT_EQ((*record)->response->status, 202);
}

// The calls of `command` the server counted (INFO commandstats).
long long CommandCalls(const std::string& server, const std::string& command) {
  const std::string info = RedisRaw(server, {"INFO", "commandstats"}).text;
  const std::string field = "cmdstat_" + command + ":calls=";
  const std::size_t at = info.find(field);
  if (at == std::string::npos) return 0;
  return std::stoll(info.substr(at + field.size()));
}

// One write per renewal: on a server of its own, the SETs the scripts ran
// (commandstats counts a script's commands too) are one per renewal.
TEST(RedisPrivateServerTest, ARenewalIsOneWrite) {
  PrivateRedis redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto store = MustOpen(redis.uri());
  ASSERT_NE(store, nullptr);
  auto claim = store->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(claim.has_value());
  ASSERT_EQ(RedisRaw(redis.server(), {"CONFIG", "RESETSTAT"}).text, "OK");
  constexpr int kRenewals = 10;
  for (int i = 1; i <= kRenewals; ++i) {
    auto renewed =
        store->ExtendLock(Id(1), claim->token, kT0 + seconds(i), seconds(10));
    ASSERT_TRUE(renewed.has_value()) << renewed.error().ToString();
    ASSERT_TRUE(*renewed);
  }
  auto lost = store->ExtendLock(Id(1), Token{}, kT0, seconds(10));
  ASSERT_TRUE(lost.has_value() && !*lost);
  EXPECT_EQ(CommandCalls(redis.server(), "set"), kRenewals);
  EXPECT_EQ(CommandCalls(redis.server(), "del"), 0);
}

// A claim whose reply is lost is sent once more on a fresh connection. Here
// the server is frozen until the resend waits for its reply: once thawed,
// it runs the first SET, then the resend, which finds the first one's
// record byte for byte and so acquires (never "in progress" against
// itself).
TEST(RedisPrivateServerTest, AResentClaimFindingItsOwnRecordIsAcquired) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  auto store = MustOpen(server.uri() + "?timeout_ms=2000&pool=2");
  ASSERT_NE(store, nullptr);
  ASSERT_EQ(RedisRaw(server.server(), {"CONFIG", "RESETSTAT"}).text, "OK");
  ASSERT_TRUE(server.Freeze());
  // The first send times out at 2 s, the resend at 4 s.
  std::thread thaw([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    server.Thaw();
  });
  auto claim = store->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  thaw.join();
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  EXPECT_FALSE(claim->takeover);
  // Both SETs ran: the resend's found the first one's record.
  EXPECT_EQ(CommandCalls(server.server(), "set"), 2);
  auto record = store->Inspect(Id(1), kT0);
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->token, claim->token);
  EXPECT_TRUE(store->Complete(Id(1), claim->token, Response{.status = 201})
                  .value_or(false));
}

TEST(RedisPrivateServerTest, WaitMakesWritesWaitForReplicas) {
  PrivateRedis primary;
  ASSERT_TRUE(primary.Start()) << primary.error();
  const std::string port = primary.server().substr(10);
  auto alone = MustOpen(primary.uri() + "?wait=1&wait_ms=50");
  ASSERT_NE(alone, nullptr);
  auto unreplicated =
      alone->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_FALSE(unreplicated.has_value());
  EXPECT_EQ(unreplicated.error().code(), ErrorCode::kUnavailable)
      << unreplicated.error().ToString();

  PrivateRedis replica({"--replicaof", "127.0.0.1", port});
  ASSERT_TRUE(replica.Start()) << replica.error();
  ASSERT_TRUE(testing::WaitFor([&] {
    return RedisRaw(replica.server(), {"INFO", "replication"})
               .text.find("master_link_status:up") != std::string::npos;
  }));
  // A replica refuses writes: -READONLY is an outage, not a bug.
  auto on_replica = MustOpen(replica.uri());
  ASSERT_NE(on_replica, nullptr);
  auto readonly =
      on_replica->Claim(Id(3), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_FALSE(readonly.has_value());
  EXPECT_EQ(readonly.error().code(), ErrorCode::kUnavailable)
      << readonly.error().ToString();

  auto store = MustOpen(primary.uri() + "?wait=1&wait_ms=60000");
  ASSERT_NE(store, nullptr);
  auto claim = store->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  auto done = store->Complete(Id(2), claim->token, Response{.status = 201});
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
  // The completed record reached the replica: its state byte is 2.
  EXPECT_EQ(RedisRaw(replica.server(),
                     {"GETRANGE", "idem:{" + Id(2).ToHex() + "}", "2", "2"})
                .text,
            std::string(1, '\2'));
}

TEST(RedisReplyErrorTest, ServerErrorsMapToWhatTheCallerShouldDo) {
  // role: the connection is closed, not reused (a failover moved the
  // master, the server restarts, the cluster is down).
  const struct {
    const char* text;
    ErrorCode code;
    bool role = false;
  } kCases[] = {
      {"OOM command not allowed when used memory > 'maxmemory'.",
       ErrorCode::kResourceExhausted},
      {"READONLY You can't write against a read only replica.",
       ErrorCode::kUnavailable, true},
      {"LOADING Redis is loading the dataset in memory",
       ErrorCode::kUnavailable, true},
      {"BUSY Redis is busy running a script.", ErrorCode::kUnavailable},
      {"CLUSTERDOWN The cluster is down", ErrorCode::kUnavailable, true},
      {"MASTERDOWN Link with MASTER is down", ErrorCode::kUnavailable, true},
      {"TRYAGAIN Multiple keys request during rehashing of slot",
       ErrorCode::kUnavailable, true},
      {"WRONGTYPE Operation against a key holding the wrong kind of value",
       ErrorCode::kDataLoss},
      {"NOAUTH Authentication required.", ErrorCode::kInternal},
      {"ERR unknown command", ErrorCode::kInternal},
  };
  for (const auto& c : kCases) {
    std::string text = c.text;
    redisReply reply{};
    reply.type = REDIS_REPLY_ERROR;
    reply.str = text.data();
    reply.len = text.size();
    const Error e = redis::ReplyError(reply, "ctx");
    EXPECT_EQ(e.code(), c.code) << c.text;
    EXPECT_EQ(e.message(), "ctx: " + text);
    EXPECT_EQ(redis::IsRoleError(&reply), c.role) << c.text;
  }
}

TEST(RedisPrivateServerTest, AFrozenServerTimesOutUnavailableAndRecovers) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  auto store = MustOpen(server.uri() + "?timeout_ms=300&pool=2");
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10)));
  ASSERT_TRUE(server.Freeze());
  auto frozen = store->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(server.Thaw());
  ASSERT_FALSE(frozen.has_value());
  EXPECT_EQ(frozen.error().code(), ErrorCode::kUnavailable)
      << frozen.error().ToString();
  // The claim may have run after the thaw (its resend did, or the first
  // send): either way it is there now, and the store works again.
  auto after = store->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(after.has_value()) << after.error().ToString();
  auto other = store->Claim(Id(3), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(other.has_value()) << other.error().ToString();
  EXPECT_EQ(other->outcome, ClaimOutcome::kAcquired);
}

TEST(RedisPrivateServerTest, TheRawKeyAndScopeNeverReachTheDump) {
  PrivateRedis server({"--rdbcompression", "no"});
  ASSERT_TRUE(server.Start()) << server.error();
  std::shared_ptr<Store> store = MustOpen(server.uri());
  ASSERT_NE(store, nullptr);
  auto clock = std::make_shared<ManualClock>(kT0);
  auto guard = testing::RunSecretRequestTwice(store, clock);
  ASSERT_EQ(RedisRaw(server.server(), {"SAVE"}).text, "OK");
  const std::string dump = testing::ReadAllFiles(server.dir());
  ASSERT_NE(dump.find("REDIS"), std::string::npos) << "no RDB file";
  testing::ExpectNoSecretIn(dump);
  EXPECT_NE(
      dump.find(
          MakeRecordId(testing::kSecretScope, testing::kSecretKey).ToHex()),
      std::string::npos);
}

TEST(RedisPrivateServerTest, CallsFailUnavailableWhileDownAndWorkAfterRestart) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  auto store = MustOpen(server.uri() + "?timeout_ms=5000&pool=2");
  ASSERT_NE(store, nullptr);
  auto before = store->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(before.has_value()) << before.error().ToString();
  ASSERT_TRUE(store->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10)));

  ASSERT_TRUE(server.Stop());
  for (int i = 0; i < 3; ++i) {
    auto down = store->Claim(Id(3), Fp(1), kT0, seconds(100), seconds(10));
    ASSERT_FALSE(down.has_value());
    EXPECT_EQ(down.error().code(), ErrorCode::kUnavailable)
        << down.error().ToString();
  }

  ASSERT_TRUE(server.Start()) << server.error();
  // The server lost its data (no persistence): the id is free again, and
  // the first call already succeeds on a fresh connection.
  auto after = store->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(after.has_value()) << after.error().ToString();
  EXPECT_EQ(after->outcome, ClaimOutcome::kAcquired);
  auto done = store->Complete(Id(1), after->token, Response{.status = 201});
  EXPECT_TRUE(done.value_or(false));
}

TEST(RedisPrivateServerTest, AnEvictingServerIsRefusedUnlessAllowed) {
  PrivateRedis server({"--maxmemory-policy", "allkeys-lru"});
  ASSERT_TRUE(server.Start()) << server.error();
  auto refused = OpenStore(server.uri());
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message().find("allow_eviction"), std::string::npos)
      << refused.error().message();
  auto allowed = OpenStore(server.uri() + "?allow_eviction=true");
  EXPECT_TRUE(allowed.has_value()) << allowed.error().ToString();
}

TEST(RedisPrivateServerTest, AServerWithoutConfigOpensWithAWarning) {
  PrivateRedis server({"--rename-command", "CONFIG", ""});
  ASSERT_TRUE(server.Start()) << server.error();
  std::string warning;
  auto store = OpenStore(
      server.uri(),
      {.sweep_interval = Duration::zero(),
       .log = [&](LogLevel, std::string_view m) { warning = std::string(m); }});
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_NE(warning.find("noeviction"), std::string::npos) << warning;
}

TEST(RedisPrivateServerTest, AFullServerIsResourceExhausted) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  auto store = MustOpen(server.uri());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10)));
  auto done = store->Claim(Id(4), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  ASSERT_TRUE(store->Complete(Id(4), done->token, Response{.status = 201})
                  .value_or(false));
  ASSERT_EQ(RedisRaw(server.server(), {"CONFIG", "SET", "maxmemory", "1"}).text,
            "OK");
  auto full = store->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code(), ErrorCode::kResourceExhausted)
      << full.error().ToString();
  // Redis refuses every SET then, even one that would not write: a claim
  // that needs no write reads the record in its way and answers it.
  auto busy = store->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(busy.has_value()) << busy.error().ToString();
  EXPECT_EQ(busy->outcome, ClaimOutcome::kInProgress);
  auto replay = store->Claim(Id(4), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  ASSERT_NE(replay->response, nullptr);
  EXPECT_EQ(replay->response->status, 201);
  // A takeover must write.
  auto takeover =
      store->Claim(Id(1), Fp(1), kT0 + seconds(11), seconds(100), seconds(10));
  ASSERT_FALSE(takeover.has_value());
  EXPECT_EQ(takeover.error().code(), ErrorCode::kResourceExhausted)
      << takeover.error().ToString();
  // Reads still work, and so do writes once there is room again.
  auto record = store->Inspect(Id(1), kT0);
  EXPECT_TRUE(record.has_value() && record->has_value());
  ASSERT_EQ(RedisRaw(server.server(), {"CONFIG", "SET", "maxmemory", "0"}).text,
            "OK");
  auto room = store->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10));
  EXPECT_TRUE(room.has_value()) << room.error().ToString();
}

}  // namespace
}  // namespace idem
