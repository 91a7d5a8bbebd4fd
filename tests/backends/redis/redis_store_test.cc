// The Redis store on one server: URIs, the key layout, damaged records,
// NOSCRIPT, what reaches the server's data, and, each on a private server
// (PrivateRedis), a restart mid-run, the eviction policy and -OOM.

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/open_store.h"
#include "idem/record_id.h"
#include "idem/redis_store.h"
#include "idem/store.h"
#include "redis_connection.h"
#include "redis_scripts.h"
#include "redis_test_util.h"
#include "support/secret_request.h"
#include "support/store_uri_checks.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using testing::PrivateRedis;
using testing::RedisRaw;

const TimePoint kT0 = TimePoint(hours(24 * 365 * 56));

Fingerprint Fp(int n) {
  Fingerprint fp;
  fp.bytes[0] = static_cast<std::uint8_t>(n);
  return fp;
}

RecordId Id(int n) {
  RecordId id;
  id.bytes[0] = static_cast<std::uint8_t>(n);
  id.bytes[31] = 0x5a;
  return id;
}

std::unique_ptr<Store> MustOpen(const std::string& uri) {
  auto store = OpenStore(uri, {.sweep_interval = Duration::zero()});
  EXPECT_TRUE(store.has_value()) << store.error().ToString();
  return store ? std::move(*store) : nullptr;
}

// A store on the shared server under a prefix of its own, deleted after.
class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IDEM_REQUIRE_TEST_REDIS();
    base_ = testing::RedisTestUri();
    server_ = testing::RedisServersOf(base_).at(0);
    prefix_ = testing::UniqueRedisPrefix("store");
    store_ = MustOpen(base_ + "?prefix=" + prefix_);
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override {
    store_.reset();
    if (!prefix_.empty()) testing::DeleteRedisKeys(base_, prefix_);
  }
  std::string Key(const RecordId& id) {
    return prefix_ + "{" + id.ToHex() + "}";
  }

  std::string base_, server_, prefix_;
  std::unique_ptr<Store> store_;
};

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
}

TEST_F(RedisStoreTest, OneHashPerRecordUnderThePrefixWithATtl) {
  ASSERT_TRUE(store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10)));
  EXPECT_EQ(RedisRaw(server_, {"TYPE", Key(Id(1))}).text, "hash");
  const long long pttl =
      std::stoll(RedisRaw(server_, {"PTTL", Key(Id(1))}).text);
  EXPECT_GT(pttl, 90'000);
  EXPECT_LE(pttl, 100'000);
  EXPECT_EQ(store_->Info().name, "redis");
  EXPECT_TRUE(store_->Info().shared_across_processes);
}

TEST_F(RedisStoreTest, ADamagedRecordIsDataLossNeverAMiss) {
  ASSERT_TRUE(store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10)));
  ASSERT_EQ(RedisRaw(server_, {"HSET", Key(Id(1)), "r", "garbage"}).text, "0");
  auto inspect = store_->Inspect(Id(1), kT0);
  ASSERT_FALSE(inspect.has_value());
  EXPECT_EQ(inspect.error().code(), ErrorCode::kDataLoss);
  auto claim = store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_FALSE(claim.has_value());
  EXPECT_EQ(claim.error().code(), ErrorCode::kDataLoss);
  EXPECT_NE(claim.error().message().find(Id(1).ToHex()), std::string::npos);

  // A field the script compares, and a key of another type.
  ASSERT_TRUE(store_->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10)));
  RedisRaw(server_, {"HSET", Key(Id(2)), "e", "soon"});
  claim = store_->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_FALSE(claim.has_value());
  EXPECT_EQ(claim.error().code(), ErrorCode::kDataLoss);
  RedisRaw(server_, {"SET", Key(Id(3)), "a string"});
  claim = store_->Claim(Id(3), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_FALSE(claim.has_value());
  EXPECT_EQ(claim.error().code(), ErrorCode::kDataLoss);
  for (int i = 1; i <= 3; ++i) {
    SCOPED_TRACE(i);
    auto extend = store_->ExtendLock(Id(i), Token{}, kT0, seconds(10));
    ASSERT_FALSE(extend.has_value());
    EXPECT_EQ(extend.error().code(), ErrorCode::kDataLoss);
  }
  // Stats reads s and e only: 1 counts by them, 2's e does not read, and
  // 3 is no hash.
  auto stats = store_->Stats(kT0);
  ASSERT_TRUE(stats.has_value()) << stats.error().ToString();
  ASSERT_TRUE(stats->has_value());
  EXPECT_EQ((*stats)->in_progress, 1u);
  EXPECT_EQ((*stats)->damaged, 1u);

  // Revoke removes a damaged record.
  ASSERT_TRUE(store_->Revoke(Id(1)).value_or(false));
  auto again = store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(again.has_value()) << again.error().ToString();
  EXPECT_EQ(again->outcome, ClaimOutcome::kAcquired);
}

// The claiming store remembers the claim's l for Complete; a renewal
// through another store moved it since. The fields must still agree.
TEST_F(RedisStoreTest, ACompleteAfterARenewalElsewhereStaysReadable) {
  auto other = MustOpen(base_ + "?prefix=" + prefix_);
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
  auto other = MustOpen(base_ + "?prefix=" + prefix_);
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

// The store sends a claim or complete once more when its connection broke
// after sending (the reply was lost): the scripts must answer the resend as
// they answered the first run, and nothing else the same way.
TEST_F(RedisStoreTest, ScriptsRecogniseTheirOwnResends) {
  const std::string key = Key(Id(1));
  const std::string fp(32, 'f'), token(16, 't'), other(16, 'o');
  auto eval = [&](const redis::Script& script, std::vector<std::string> args) {
    std::vector<std::string> argv = {"EVAL", std::string(script.source), "1",
                                     key};
    argv.insert(argv.end(), args.begin(), args.end());
    return RedisRaw(server_, argv);
  };
  const std::vector<std::string> claim = {fp,    token,    "100",   "200",
                                          "300", "record", "100000"};
  EXPECT_EQ(eval(redis::ClaimScript(), claim).elements,
            (std::vector<std::string>{"1", "0"}));
  EXPECT_EQ(eval(redis::ClaimScript(), claim).elements,
            (std::vector<std::string>{"1", "0"}));
  // Another claim of the same fingerprint is in the way.
  auto blocked = eval(redis::ClaimScript(),
                      {fp, other, "100", "200", "300", "record", "100000"});
  ASSERT_FALSE(blocked.elements.empty());
  EXPECT_EQ(blocked.elements[0], "0");

  // A renewal: written once, its resend answered alike; a renewal that read
  // an older l reads again (2); another token, or an expired record, 0.
  const std::vector<std::string> extend = {token, "100", "200", "250", "rec"};
  EXPECT_EQ(eval(redis::ExtendLockScript(), extend).text, "1");
  EXPECT_EQ(eval(redis::ExtendLockScript(), extend).text, "1");
  EXPECT_EQ(RedisRaw(server_, {"HGET", key, "l"}).text, "250");
  EXPECT_EQ(
      eval(redis::ExtendLockScript(), {token, "100", "200", "260", "r"}).text,
      "2");
  EXPECT_EQ(
      eval(redis::ExtendLockScript(), {other, "100", "250", "260", "r"}).text,
      "0");
  EXPECT_EQ(
      eval(redis::ExtendLockScript(), {token, "300", "250", "300", "r"}).text,
      "0");
  EXPECT_EQ(RedisRaw(server_, {"HGET", key, "l"}).text, "250");

  const std::vector<std::string> complete = {token, "done", "call-1", "250"};
  EXPECT_EQ(eval(redis::CompleteScript(), complete).text, "1");
  EXPECT_EQ(eval(redis::CompleteScript(), complete).text, "1");
  EXPECT_EQ(
      eval(redis::CompleteScript(), {token, "done", "call-2", "250"}).text,
      "0");
  EXPECT_EQ(
      eval(redis::CompleteScript(), {other, "done", "call-1", "250"}).text,
      "0");
  // A completed record is not "held" by its token any more.
  EXPECT_EQ(eval(redis::ClaimScript(), claim).elements[0], "0");
}

// The calls of `command` the server counted (INFO commandstats).
long long CommandCalls(const std::string& server, const std::string& command) {
  const std::string info = RedisRaw(server, {"INFO", "commandstats"}).text;
  const std::string field = "cmdstat_" + command + ":calls=";
  const std::size_t at = info.find(field);
  if (at == std::string::npos) return 0;
  return std::stoll(info.substr(at + field.size()));
}

// One write per renewal: on a server of its own, the HSETs the scripts ran
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
  EXPECT_EQ(CommandCalls(redis.server(), "hset"), kRenewals);
  EXPECT_EQ(CommandCalls(redis.server(), "del"), 0);
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
  EXPECT_EQ(
      RedisRaw(replica.server(), {"HGET", "idem:{" + Id(2).ToHex() + "}", "s"})
          .text,
      "2");
}

TEST(RedisReplyErrorTest, ServerErrorsMapToWhatTheCallerShouldDo) {
  const struct {
    const char* text;
    ErrorCode code;
  } kCases[] = {
      {"OOM command not allowed when used memory > 'maxmemory'.",
       ErrorCode::kResourceExhausted},
      {"READONLY You can't write against a read only replica.",
       ErrorCode::kUnavailable},
      {"LOADING Redis is loading the dataset in memory",
       ErrorCode::kUnavailable},
      {"BUSY Redis is busy running a script.", ErrorCode::kUnavailable},
      {"CLUSTERDOWN The cluster is down", ErrorCode::kUnavailable},
      {"MASTERDOWN Link with MASTER is down", ErrorCode::kUnavailable},
      {"TRYAGAIN Multiple keys request during rehashing of slot",
       ErrorCode::kUnavailable},
      {"WRONGTYPE Operation against a key holding the wrong kind of value",
       ErrorCode::kDataLoss},
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
  ASSERT_EQ(RedisRaw(server.server(), {"CONFIG", "SET", "maxmemory", "1"}).text,
            "OK");
  auto full = store->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code(), ErrorCode::kResourceExhausted)
      << full.error().ToString();
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
