// The Redis store's asynchronous calls (ClaimAsync, CompleteAsync on the
// store's loop thread; redis_async_calls.h): the claim table through them,
// checked with the synchronous Inspect; many threads at once; a database
// other than 0; NOSCRIPT; a damaged record; and, each on a private server,
// a frozen server (bounded by timeout_ms), a server killed and restarted
// on its port, and the store destroyed with calls in flight. Every wait is
// a future with a generous bound, never a sleep.

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include "idem/clock.h"
#include "idem/open_store.h"
#include "idem/redis_store.h"
#include "idem/store.h"
#include "redis_async_loop.h"
#include "redis_store_fixture.h"
#include "redis_test_util.h"
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
// How long a test waits for an answer that must come: far beyond every
// timeout the tests set, so only a lost answer fails it.
constexpr auto kGenerous = seconds(60);

template <typename T>
Result<T> Await(std::future<Result<T>>& f) {
  if (f.wait_for(kGenerous) != std::future_status::ready) {
    ADD_FAILURE() << "no answer within " << kGenerous.count() << " s";
    return MakeError(ErrorCode::kInternal, "no answer");
  }
  return f.get();
}

std::future<Result<ClaimResult>> StartClaim(Store& store, const RecordId& id,
                                            const Fingerprint& fp,
                                            TimePoint now = kT0) {
  auto p = std::make_shared<std::promise<Result<ClaimResult>>>();
  auto f = p->get_future();
  store.ClaimAsync(id, fp, now, seconds(100), seconds(10),
                   [p](Result<ClaimResult> r) { p->set_value(std::move(r)); });
  return f;
}

Result<ClaimResult> ClaimAsync(Store& store, const RecordId& id,
                               const Fingerprint& fp, TimePoint now = kT0) {
  auto f = StartClaim(store, id, fp, now);
  return Await(f);
}

Result<bool> CompleteAsync(Store& store, const RecordId& id, const Token& token,
                           Response response) {
  auto p = std::make_shared<std::promise<Result<bool>>>();
  auto f = p->get_future();
  store.CompleteAsync(id, token,
                      std::make_shared<const Response>(std::move(response)),
                      [p](Result<bool> r) { p->set_value(std::move(r)); });
  return Await(f);
}

TEST_F(RedisStoreTest, AsyncCallsFollowTheClaimTable) {
  EXPECT_TRUE(store_->Info().async_calls);
  auto claim = ClaimAsync(*store_, Id(1), Fp(1));
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  auto record = store_->Inspect(Id(1), kT0);
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
  EXPECT_EQ((*record)->token, claim->token);

  auto busy = ClaimAsync(*store_, Id(1), Fp(1));
  ASSERT_TRUE(busy.has_value()) << busy.error().ToString();
  EXPECT_EQ(busy->outcome, ClaimOutcome::kInProgress);
  EXPECT_EQ(busy->locked_until, claim->locked_until);

  auto wrong = CompleteAsync(*store_, Id(1), Token(), {.body = "no"});
  ASSERT_TRUE(wrong.has_value()) << wrong.error().ToString();
  EXPECT_FALSE(*wrong);
  auto done = CompleteAsync(*store_, Id(1), claim->token,
                            {.status = 201, .body = "made"});
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
  record = store_->Inspect(Id(1), kT0);
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kCompleted);

  auto replay = ClaimAsync(*store_, Id(1), Fp(1));
  ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
  ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(replay->response->status, 201);
  EXPECT_EQ(replay->response->body, "made");
  auto mismatch = ClaimAsync(*store_, Id(1), Fp(2));
  ASSERT_TRUE(mismatch.has_value()) << mismatch.error().ToString();
  EXPECT_EQ(mismatch->outcome, ClaimOutcome::kMismatch);
  auto again = CompleteAsync(*store_, Id(1), claim->token, {.body = "2"});
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(*again);
}

// The threads of this process named `name`.
int ThreadsNamed(const std::string& name) {
  int n = 0;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++n;
  }
  return n;
}

// The loop's thread starts at the first asynchronous call, not at Open: a
// store opened before a fork and used synchronously in the child has no
// thread to lose.
TEST_F(RedisStoreTest, TheLoopThreadStartsAtTheFirstAsyncCall) {
  const std::string name = redis::AsyncLoop::kThreadName;
  ASSERT_TRUE(testing::WaitFor([&] { return ThreadsNamed(name) == 0; }));
  auto claim = store_->Claim(Id(7), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(ThreadsNamed(name), 0);
  auto async = ClaimAsync(*store_, Id(8), Fp(1));
  ASSERT_TRUE(async.has_value()) << async.error().ToString();
  EXPECT_EQ(ThreadsNamed(name), 1);
  store_.reset();
  EXPECT_TRUE(testing::WaitFor([&] { return ThreadsNamed(name) == 0; }));
}

TEST_F(RedisStoreTest, AsyncCompleteOfAClaimMadeElsewhereReadsItFirst) {
  auto other = MustOpen(Uri());
  ASSERT_NE(other, nullptr);
  auto claim = ClaimAsync(*other, Id(2), Fp(1));
  ASSERT_TRUE(claim.has_value() && claim->outcome == ClaimOutcome::kAcquired);
  auto done = CompleteAsync(*store_, Id(2), claim->token, {.body = "x"});
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
  // Deleted by hand: vanished, false.
  auto next = ClaimAsync(*other, Id(3), Fp(1));
  ASSERT_TRUE(next.has_value() && next->outcome == ClaimOutcome::kAcquired);
  ASSERT_EQ(RedisRaw(server_, {"DEL", Key(Id(3))}).text, "1");
  auto vanished = CompleteAsync(*store_, Id(3), next->token, {.body = "x"});
  ASSERT_TRUE(vanished.has_value()) << vanished.error().ToString();
  EXPECT_FALSE(*vanished);
}

TEST_F(RedisStoreTest, AsyncTakeoverSurvivesAFlushedScriptCache) {
  auto claim = ClaimAsync(*store_, Id(4), Fp(1));
  ASSERT_TRUE(claim.has_value() && claim->outcome == ClaimOutcome::kAcquired);
  ASSERT_EQ(RedisRaw(server_, {"SCRIPT", "FLUSH"}).text, "OK");
  // Its lock (10 s) timed out: taken over by the reclaim script (NOSCRIPT,
  // then EVAL).
  auto later = ClaimAsync(*store_, Id(4), Fp(1), kT0 + seconds(11));
  ASSERT_TRUE(later.has_value()) << later.error().ToString();
  EXPECT_EQ(later->outcome, ClaimOutcome::kAcquired);
  EXPECT_TRUE(later->takeover);
  ASSERT_EQ(RedisRaw(server_, {"SCRIPT", "FLUSH"}).text, "OK");
  auto old = CompleteAsync(*store_, Id(4), claim->token, {.body = "old"});
  ASSERT_TRUE(old.has_value()) << old.error().ToString();
  EXPECT_FALSE(*old);
  auto done = CompleteAsync(*store_, Id(4), later->token, {.body = "new"});
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
}

// Larger than a socket buffer and than hiredis' 16 KiB reads: written and
// read in many pieces by the loop.
// The loop sends commands formatted on the caller's thread; a server that
// answers NOSCRIPT gets the same arguments again after EVAL and the source.
TEST(RedisFormattedCommandTest, EvalInsteadKeepsAnEvalshasArguments) {
  const std::string sha(40, 'a');
  const std::string binary("tok\0en\r\n\xff", 10);
  const redis::Command evalsha = {"EVALSHA", sha, "1", "idem:key", binary, ""};
  const redis::Command eval = {"EVAL", "return 1", "1", "idem:key", binary, ""};
  EXPECT_EQ(redis::EvalInstead(redis::Format(evalsha), "return 1"),
            redis::Format(eval));
  EXPECT_EQ(redis::Format({"GET", "k"}), "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
  // As hiredis formats it, empty and binary arguments included.
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (std::string_view arg : evalsha) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  char* formatted = nullptr;
  const int length = redisFormatCommandArgv(
      &formatted, static_cast<int>(argv.size()), argv.data(), lengths.data());
  ASSERT_GT(length, 0);
  EXPECT_EQ(redis::Format(evalsha),
            std::string(formatted, static_cast<std::size_t>(length)));
  redisFreeCommand(formatted);
}

TEST(RedisFormattedCommandTest, EvalInsteadRefusesAnythingElse) {
  EXPECT_THROW(redis::EvalInstead(redis::Format({"GET", "k"}), "return 1"),
               std::invalid_argument);
  const std::string evalsha =
      redis::Format({"EVALSHA", std::string(40, 'a'), "0"});
  EXPECT_THROW(redis::EvalInstead(evalsha.substr(0, 30), "return 1"),
               std::invalid_argument);
  EXPECT_THROW(redis::EvalInstead("", "return 1"), std::invalid_argument);
}

TEST_F(RedisStoreTest, AsyncCallsCarryALargeResponse) {
  std::string body(4 << 20, 'x');
  for (std::size_t i = 0; i < body.size(); i += 4099) body[i] = 'y';
  auto claim = ClaimAsync(*store_, Id(9), Fp(1));
  ASSERT_TRUE(claim.has_value() && claim->outcome == ClaimOutcome::kAcquired);
  auto done = CompleteAsync(*store_, Id(9), claim->token, {.body = body});
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
  auto replay = ClaimAsync(*store_, Id(9), Fp(1));
  ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
  ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_TRUE(replay->response->body == body);
}

TEST_F(RedisStoreTest, AsyncClaimOfADamagedRecordIsDataLoss) {
  ASSERT_EQ(RedisRaw(server_, {"SET", Key(Id(5)), "garbage"}).text, "OK");
  auto claim = ClaimAsync(*store_, Id(5), Fp(1));
  ASSERT_FALSE(claim.has_value());
  EXPECT_EQ(claim.error().code(), ErrorCode::kDataLoss)
      << claim.error().ToString();
}

TEST_F(RedisStoreTest, AsyncCallsSelectTheDatabase) {
  // The shared URI names /0: the same server's database 1.
  std::string uri = base_;
  uri.replace(uri.rfind("/0"), 2, "/1");
  auto store = MustOpen(uri + "?prefix=" + prefix_);
  ASSERT_NE(store, nullptr);
  auto claim = ClaimAsync(*store, Id(6), Fp(1));
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  EXPECT_EQ(RedisRaw(server_, {"EXISTS", Key(Id(6))}).text, "0");
  auto record = store->Inspect(Id(6), kT0);
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->token, claim->token);
  ASSERT_TRUE(store->Revoke(Id(6)).value_or(false));
}

TEST_F(RedisStoreTest, ManyThreadsOfAsyncCallsAcquireEachKeyOnce) {
  constexpr int kThreads = 16;
  constexpr int kCalls = 200;
  constexpr int kShared = 20;  // Keys every thread claims.
  std::vector<std::atomic<int>> answers(kThreads * kCalls);
  std::vector<std::atomic<int>> acquired(kShared);
  std::atomic<int> errors{0}, distinct_acquired{0};
  std::atomic<int> remaining{kThreads * kCalls};
  std::promise<void> all_answered;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        RecordId id;
        const bool shared = i % 2 == 0;
        id.bytes[0] = 0xa0;
        id.bytes[1] = static_cast<std::uint8_t>(shared ? 0xff : t);
        id.bytes[2] = static_cast<std::uint8_t>(shared ? (i / 2) % kShared : i);
        const int slot = t * kCalls + i;
        store_->ClaimAsync(
            id, Fp(1), kT0, seconds(100), seconds(100),
            [&, slot, shared, key = id.bytes[2]](Result<ClaimResult> r) {
              answers[slot].fetch_add(1);
              if (remaining.fetch_sub(1) == 1) all_answered.set_value();
              if (!r) {
                errors.fetch_add(1);
              } else if (r->outcome == ClaimOutcome::kAcquired) {
                (shared ? acquired[key] : distinct_acquired).fetch_add(1);
              }
            });
      }
    });
  }
  for (auto& th : threads) th.join();
  // Answered within the store's timeout (5 s); waited for generously.
  EXPECT_EQ(all_answered.get_future().wait_for(kGenerous),
            std::future_status::ready);
  store_.reset();  // No answer after the destructor, none twice.
  for (int i = 0; i < kThreads * kCalls; ++i) {
    ASSERT_EQ(answers[i].load(), 1) << "call " << i;
  }
  EXPECT_EQ(errors.load(), 0);
  for (int k = 0; k < kShared; ++k) EXPECT_EQ(acquired[k].load(), 1) << k;
  EXPECT_EQ(distinct_acquired.load(), kThreads * kCalls / 2);
}

TEST(RedisAsyncServerTest, AFrozenServerFailsPendingCallsWithinTheTimeout) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  auto store = MustOpen(server.uri() + "?timeout_ms=500");
  ASSERT_NE(store, nullptr);
  auto warm = ClaimAsync(*store, Id(1), Fp(1));
  ASSERT_TRUE(warm.has_value()) << warm.error().ToString();
  ASSERT_TRUE(server.Freeze());
  std::vector<std::future<Result<ClaimResult>>> pending;
  for (int i = 0; i < 20; ++i) {
    pending.push_back(StartClaim(*store, Id(10 + i), Fp(1)));
  }
  for (auto& f : pending) {
    auto r = Await(f);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), ErrorCode::kUnavailable)
        << r.error().ToString();
    EXPECT_NE(r.error().message().find("timed out"), std::string::npos)
        << r.error().ToString();
  }
  ASSERT_TRUE(server.Thaw());
  // The stuck connection was dropped: a new call connects again.
  auto after = ClaimAsync(*store, Id(50), Fp(1));
  ASSERT_TRUE(after.has_value()) << after.error().ToString();
  EXPECT_EQ(after->outcome, ClaimOutcome::kAcquired);
}

TEST(RedisAsyncServerTest, AServerKilledAndRestartedIsReachedAgain) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  auto store = MustOpen(server.uri() + "?timeout_ms=2000");
  ASSERT_NE(store, nullptr);
  auto first = ClaimAsync(*store, Id(1), Fp(1));
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  ASSERT_TRUE(server.Stop());
  auto down = ClaimAsync(*store, Id(2), Fp(1));
  ASSERT_FALSE(down.has_value());
  EXPECT_EQ(down.error().code(), ErrorCode::kUnavailable)
      << down.error().ToString();
  ASSERT_TRUE(server.Start()) << server.error();
  auto up = ClaimAsync(*store, Id(3), Fp(1));
  ASSERT_TRUE(up.has_value()) << up.error().ToString();
  EXPECT_EQ(up->outcome, ClaimOutcome::kAcquired);
  auto done = CompleteAsync(*store, Id(3), up->token, {.body = "ok"});
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
}

TEST(RedisAsyncServerTest, DestroyingTheStoreAnswersEveryCallInFlight) {
  PrivateRedis server;
  ASSERT_TRUE(server.Start()) << server.error();
  auto store = MustOpen(server.uri() + "?timeout_ms=60000");
  ASSERT_NE(store, nullptr);
  auto warm = ClaimAsync(*store, Id(1), Fp(1));
  ASSERT_TRUE(warm.has_value()) << warm.error().ToString();
  ASSERT_TRUE(server.Freeze());  // Nothing is answered from here on.
  std::vector<std::future<Result<ClaimResult>>> pending;
  for (int i = 0; i < 50; ++i) {
    pending.push_back(StartClaim(*store, Id(10 + i), Fp(1)));
  }
  store.reset();
  for (auto& f : pending) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    auto r = f.get();
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), ErrorCode::kUnavailable)
        << r.error().ToString();
  }
  ASSERT_TRUE(server.Thaw());
}

TEST(RedisAsyncServerTest, AsyncCallsAuthenticateTheirConnection) {
  PrivateRedis server({"--requirepass", "s3cret-Pass"});
  ASSERT_TRUE(server.Start()) << server.error();
  for (const std::string user : {"", "default"}) {
    auto store =
        MustOpen("redis://" + user + ":s3cret-Pass@" + server.server() + "/2");
    ASSERT_NE(store, nullptr);
    auto claim = ClaimAsync(*store, Id(user.empty() ? 1 : 2), Fp(1));
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    auto done = CompleteAsync(*store, Id(user.empty() ? 1 : 2), claim->token,
                              {.body = "ok"});
    ASSERT_TRUE(done.has_value()) << done.error().ToString();
    EXPECT_TRUE(*done);
  }
}

TEST(RedisAsyncServerTest, ARefusedPasswordFailsTheCallsWaitingToConnect) {
  PrivateRedis server({"--requirepass", "old-Pass"});
  ASSERT_TRUE(server.Start()) << server.error();
  auto store = MustOpen("redis://:old-Pass@" + server.server() + "/0");
  ASSERT_NE(store, nullptr);
  // The asynchronous connection is made at the first asynchronous call,
  // after the password changed.
  ASSERT_EQ(RedisRaw(server.server(),
                     {"CONFIG", "SET", "requirepass", "new-Pass"}, "old-Pass")
                .text,
            "OK");
  auto refused = ClaimAsync(*store, Id(1), Fp(1));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), ErrorCode::kInternal)
      << refused.error().ToString();
  EXPECT_NE(refused.error().message().find("authentication refused"),
            std::string::npos)
      << refused.error().ToString();
  EXPECT_EQ(refused.error().message().find("Pass"), std::string::npos)
      << refused.error().ToString();
  ASSERT_EQ(RedisRaw(server.server(),
                     {"CONFIG", "SET", "requirepass", "old-Pass"}, "new-Pass")
                .text,
            "OK");
  auto accepted = ClaimAsync(*store, Id(1), Fp(1));
  ASSERT_TRUE(accepted.has_value()) << accepted.error().ToString();
  EXPECT_EQ(accepted->outcome, ClaimOutcome::kAcquired);
}

TEST(RedisAsyncServerTest, AClusterStoreKeepsItsCallsSynchronous) {
  auto store = OpenStore("redis-cluster://127.0.0.1:1?connect=lazy",
                         {.sweep_interval = Duration::zero()});
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_FALSE((*store)->Info().async_calls);
}

}  // namespace
}  // namespace idem
