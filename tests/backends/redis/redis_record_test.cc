// The Redis store's values on the shared server: one string per record
// holding the record codec's bytes (and a completed record's call id), the
// key's TTL, damaged values and hashes of the earlier layout, the scripts'
// answers to their own resends, and a claim's races between its SET and
// the script that replaces a record in its way.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/redis_store.h"
#include "idem/store.h"
#include "idem/store/record_codec.h"
#include "redis_scripts.h"
#include "redis_store_fixture.h"
#include "redis_store_test_peer.h"
#include "redis_test_util.h"
#include "support/durable_store.h"

namespace idem {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using testing::Fp;
using testing::Id;
using testing::MustOpen;
using testing::MustOpenRedis;
using testing::RedisRaw;
using testing::RedisStoreTest;

const TimePoint kT0 = testing::kRedisT0;
// A ttl past ten years: the key gets no Redis TTL.
constexpr Duration kForever = hours(24 * 366 * 11);

Token Tok(int n) {
  Token t;
  t.bytes[0] = static_cast<std::uint8_t>(n);
  t.bytes[15] = 0x7b;
  return t;
}

// An in-progress record of token `n`, expiring at `expires_at`.
std::string InProgress(int n, TimePoint locked_until, TimePoint expires_at) {
  return EncodeRecord({.state = RecordState::kInProgress,
                       .fingerprint = Fp(1),
                       .token = Tok(n),
                       .locked_until = locked_until,
                       .expires_at = expires_at});
}

// What the scripts compare.
std::string Header(const std::string& value) { return value.substr(0, 67); }

long long Pttl(const std::string& server, const std::string& key) {
  return std::stoll(RedisRaw(server, {"PTTL", key}).text);
}

TEST_F(RedisStoreTest, OneStringPerRecordUnderThePrefixWithATtl) {
  auto claim = store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(RedisRaw(server_, {"TYPE", Key(Id(1))}).text, "string");
  auto record = DecodeRecord(Value(Id(1)));
  ASSERT_TRUE(record.has_value()) << record.error().ToString();
  EXPECT_EQ(record->state, RecordState::kInProgress);
  EXPECT_EQ(record->fingerprint, Fp(1));
  EXPECT_EQ(record->token, claim->token);
  EXPECT_EQ(record->locked_until, kT0 + seconds(10));
  EXPECT_EQ(record->expires_at, kT0 + seconds(100));
  const long long pttl = Pttl(server_, Key(Id(1)));
  EXPECT_GT(pttl, 90'000);
  EXPECT_LE(pttl, 100'000);
  EXPECT_EQ(store_->Info().name, "redis");
  EXPECT_TRUE(store_->Info().shared_across_processes);
}

// No TTL beyond ten years, whichever path writes the record: a claim of a
// free key, a claim over an expired record (whose TTL it drops or sets),
// and a renewal (which keeps it).
TEST_F(RedisStoreTest, ARecordMeantNeverToExpireHasNoTtl) {
  ASSERT_TRUE(store_->Claim(Id(1), Fp(1), kT0, kForever, seconds(10)));
  EXPECT_EQ(Pttl(server_, Key(Id(1))), -1);

  ASSERT_TRUE(store_->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10)));
  const TimePoint later = kT0 + seconds(200);
  auto forever = store_->Claim(Id(2), Fp(1), later, kForever, seconds(10));
  ASSERT_TRUE(forever.has_value()) << forever.error().ToString();
  EXPECT_EQ(forever->outcome, ClaimOutcome::kAcquired);
  EXPECT_FALSE(forever->takeover);  // Expired, not taken over.
  EXPECT_EQ(Pttl(server_, Key(Id(2))), -1);
  ASSERT_TRUE(
      store_->ExtendLock(Id(2), forever->token, later + seconds(5), seconds(10))
          .value_or(false));
  EXPECT_EQ(Pttl(server_, Key(Id(2))), -1);

  const TimePoint much_later = later + kForever + seconds(1);
  auto bounded =
      store_->Claim(Id(2), Fp(1), much_later, seconds(100), seconds(10));
  ASSERT_TRUE(bounded.has_value()) << bounded.error().ToString();
  EXPECT_EQ(bounded->outcome, ClaimOutcome::kAcquired);
  EXPECT_GT(Pttl(server_, Key(Id(2))), 90'000);
}

TEST_F(RedisStoreTest, ACompletedRecordsCallIdIsStrippedOnRead) {
  auto claim = store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(claim.has_value());
  const Response made{.status = 201, .body = "made"};
  ASSERT_TRUE(store_->Complete(Id(1), claim->token, made).value_or(false));
  const std::string value = Value(Id(1));
  // The record's encoding, then the 16 bytes of the call that completed it.
  ASSERT_GT(value.size(), 16u);
  EXPECT_FALSE(DecodeRecord(value).has_value());
  auto encoded = DecodeRecord(value.substr(0, value.size() - 16));
  ASSERT_TRUE(encoded.has_value()) << encoded.error().ToString();
  EXPECT_EQ(encoded->state, RecordState::kCompleted);
  EXPECT_EQ(encoded->token, claim->token);

  auto record = store_->Inspect(Id(1), kT0);
  ASSERT_TRUE(record.has_value()) << record.error().ToString();
  ASSERT_TRUE(record->has_value());
  EXPECT_EQ(**record, *encoded);
  ASSERT_NE((*record)->response, nullptr);
  EXPECT_EQ((*record)->response->body, "made");
  auto replay = store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(replay->response->body, "made");
  // Another Complete of the same claim is another call: not a resend.
  EXPECT_FALSE(store_->Complete(Id(1), claim->token, made).value_or(true));
}

TEST_F(RedisStoreTest, ADamagedValueIsDataLossNeverAMiss) {
  auto set = [&](int id, const std::string& value) {
    ASSERT_EQ(RedisRaw(server_, {"SET", Key(Id(id)), value, "KEEPTTL"}).text,
              "OK");
  };
  auto completed = [&](int id) {
    auto claim = store_->Claim(Id(id), Fp(1), kT0, seconds(100), seconds(10));
    EXPECT_TRUE(claim.has_value());
    EXPECT_TRUE(
        store_->Complete(Id(id), claim->token, Response{.body = "hello"})
            .value_or(false));
    return Value(Id(id));
  };
  // 1: garbage.
  set(1, "garbage");
  // 2: a completed record with a bit flipped in its body (the checksum's
  // business; its header reads).
  std::string flipped = completed(2);
  flipped[flipped.size() - 16 - 4 - 1] ^= 0x01;
  set(2, flipped);
  // 3: a bad magic byte.
  std::string magic = InProgress(3, kT0 + seconds(10), kT0 + seconds(100));
  magic[0] = 'X';
  set(3, magic);
  // 4: shorter than a header.
  set(4, InProgress(4, kT0, kT0 + seconds(100)).substr(0, 30));
  // 5: a completed record without its call id.
  const std::string whole = completed(5);
  set(5, whole.substr(0, whole.size() - 16));
  for (int i = 1; i <= 5; ++i) {
    SCOPED_TRACE(i);
    testing::ExpectDataLossOnEveryCall(*store_, Id(i), Token{}, server_);
  }
  // Stats reads each header: 2 and 5 count by theirs; 1, 3 and 4 have none
  // that reads.
  auto stats = store_->Stats(kT0);
  ASSERT_TRUE(stats.has_value()) << stats.error().ToString();
  ASSERT_TRUE(stats->has_value());
  EXPECT_EQ((*stats)->completed, 2u);
  EXPECT_EQ((*stats)->in_progress, 0u);
  EXPECT_EQ((*stats)->damaged, 3u);

  // Revoke removes a damaged record.
  ASSERT_TRUE(store_->Revoke(Id(1)).value_or(false));
  auto again = store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(again.has_value()) << again.error().ToString();
  EXPECT_EQ(again->outcome, ClaimOutcome::kAcquired);
}

// A record as builds before the string layout wrote it: a hash.
TEST_F(RedisStoreTest, AHashOfTheEarlierLayoutIsDataLossAndLeftAlone) {
  ASSERT_EQ(RedisRaw(server_, {"HSET", Key(Id(1)), "s", "1", "f",
                               std::string(32, 'f'), "t", std::string(16, 't'),
                               "l", "1", "e", "2", "r", "x", "k", "0"})
                .text,
            "7");
  testing::ExpectDataLossOnEveryCall(*store_, Id(1), Token{}, server_);
  auto claim = store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_FALSE(claim.has_value());
  EXPECT_NE(claim.error().message().find("earlier version"), std::string::npos)
      << claim.error().message();
  // Stats and purges skip it.
  ASSERT_TRUE(store_->Claim(Id(2), Fp(1), kT0, seconds(100), seconds(10)));
  auto stats = store_->Stats(kT0);
  ASSERT_TRUE(stats.has_value() && stats->has_value());
  EXPECT_EQ((*stats)->in_progress, 1u);
  EXPECT_EQ((*stats)->damaged, 0u);
  auto purged = store_->PurgeExpired(kT0 + hours(1), 100);
  ASSERT_TRUE(purged.has_value()) << purged.error().ToString();
  EXPECT_EQ(*purged, 1u);
  EXPECT_EQ(RedisRaw(server_, {"TYPE", Key(Id(1))}).text, "hash");

  ASSERT_TRUE(store_->Revoke(Id(1)).value_or(false));
  auto again = store_->Claim(Id(1), Fp(1), kT0, seconds(100), seconds(10));
  ASSERT_TRUE(again.has_value()) << again.error().ToString();
  EXPECT_EQ(again->outcome, ClaimOutcome::kAcquired);
}

// The store sends a claim's script, a renewal and a complete once more when
// its connection broke after sending (the reply was lost): each script must
// answer the resend as it answered the first run, and nothing else so.
TEST_F(RedisStoreTest, ScriptsRecogniseTheirOwnResends) {
  const std::string key = Key(Id(1));
  auto eval = [&](const redis::Script& script, std::vector<std::string> args) {
    std::vector<std::string> argv = {"EVAL", std::string(script.source), "1",
                                     key};
    argv.insert(argv.end(), args.begin(), args.end());
    return RedisRaw(server_, argv).text;
  };
  const TimePoint expires = kT0 + seconds(100);
  const std::string old = InProgress(2, kT0 + seconds(10), expires);
  const std::string mine = InProgress(1, kT0 + seconds(10), expires);
  const std::string other = InProgress(3, kT0 + seconds(10), expires);
  ASSERT_EQ(RedisRaw(server_, {"SET", key, old}).text, "OK");

  // A claim over the record it read; one that read an older header loses.
  EXPECT_EQ(eval(redis::ReclaimScript(), {Header(old), mine, "100000"}), "1");
  EXPECT_EQ(eval(redis::ReclaimScript(), {Header(old), mine, "100000"}), "1");
  EXPECT_EQ(eval(redis::ReclaimScript(), {Header(old), other, "100000"}), "0");
  EXPECT_EQ(Value(Id(1)), mine);
  EXPECT_GT(Pttl(server_, key), 0);

  // A renewal: written once, its resend answered alike; a renewal that
  // read an older header of the same claim reads again (2); another
  // claim's header, 0.
  const std::string renewed = InProgress(1, kT0 + seconds(20), expires);
  EXPECT_EQ(eval(redis::ExtendLockScript(), {Header(mine), renewed}), "1");
  EXPECT_EQ(eval(redis::ExtendLockScript(), {Header(mine), renewed}), "1");
  EXPECT_EQ(DecodeRecord(Value(Id(1)))->locked_until, kT0 + seconds(20));
  const std::string later = InProgress(1, kT0 + seconds(30), expires);
  EXPECT_EQ(eval(redis::ExtendLockScript(), {Header(mine), later}), "2");
  EXPECT_EQ(eval(redis::ExtendLockScript(), {Header(other), later}), "0");
  EXPECT_EQ(Value(Id(1)), renewed);

  const Record held = *DecodeRecord(renewed);
  const std::string done = EncodeCompleted(held, Response{.status = 201});
  const std::string call1 = done + std::string(16, '1');
  const std::string call2 = done + std::string(16, '2');
  const std::string token1(Tok(1).view()), token3(Tok(3).view());
  EXPECT_EQ(eval(redis::CompleteScript(), {token1, call1}), "1");
  EXPECT_EQ(eval(redis::CompleteScript(), {token1, call1}), "1");
  EXPECT_EQ(eval(redis::CompleteScript(), {token1, call2}), "0");
  EXPECT_EQ(eval(redis::CompleteScript(), {token3, call1}), "0");
  EXPECT_EQ(Value(Id(1)), call1);
  // A completed record is no longer held: no renewal, release or claim
  // over the in-progress header read before.
  EXPECT_EQ(eval(redis::ExtendLockScript(), {Header(renewed), later}), "0");
  EXPECT_EQ(eval(redis::ReleaseScript(), {token1}), "0");
  EXPECT_EQ(eval(redis::ReclaimScript(), {Header(renewed), other, "100"}), "0");

  // A purge deletes only the header it read.
  EXPECT_EQ(eval(redis::PurgeScript(), {Header(renewed)}), "0");
  EXPECT_EQ(eval(redis::PurgeScript(), {Header(call1)}), "1");
  EXPECT_EQ(RedisRaw(server_, {"EXISTS", key}).text, "0");

  // A release: only of the token's in-progress record.
  ASSERT_EQ(RedisRaw(server_, {"SET", key, mine}).text, "OK");
  EXPECT_EQ(eval(redis::ReleaseScript(), {token3}), "0");
  EXPECT_EQ(eval(redis::ReleaseScript(), {token1}), "1");
  EXPECT_EQ(RedisRaw(server_, {"EXISTS", key}).text, "0");
}

// Two takeovers of one timed-out lock: the one whose script comes second
// finds the header changed, claims again and answers the winner's record.
// The same over an expired record, the winner with another fingerprint.
TEST_F(RedisStoreTest, AClaimWhoseReplaceLosesItsRaceReadsAgain) {
  auto racer = MustOpenRedis(Uri());
  ASSERT_NE(racer, nullptr);
  auto other = MustOpen(Uri());
  ASSERT_NE(other, nullptr);
  struct Case {
    const char* name;
    TimePoint now;       // The holder's lock timed out, or it expired.
    Fingerprint winner;  // The other claim's fingerprint.
    ClaimOutcome lost;   // What the racer answers.
  };
  const Case kCases[] = {
      {"takeover", kT0 + seconds(11), Fp(1), ClaimOutcome::kInProgress},
      {"expired", kT0 + seconds(101), Fp(2), ClaimOutcome::kMismatch},
  };
  int n = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const RecordId id = Id(++n);
    auto holder = store_->Claim(id, Fp(1), kT0, seconds(100), seconds(10));
    ASSERT_TRUE(holder.has_value());
    std::optional<Result<ClaimResult>> winner;
    int hooks = 0;
    RedisStoreTestPeer::SetReclaimHook(*racer, [&](int) {
      if (hooks++ == 0) {
        winner = other->Claim(id, c.winner, c.now, seconds(100), seconds(10));
      }
    });
    auto lost = racer->Claim(id, Fp(1), c.now, seconds(100), seconds(10));
    RedisStoreTestPeer::SetReclaimHook(*racer, nullptr);
    ASSERT_TRUE(lost.has_value()) << lost.error().ToString();
    ASSERT_TRUE(winner.has_value() && winner->has_value());
    EXPECT_EQ((*winner)->outcome, ClaimOutcome::kAcquired);
    EXPECT_EQ((*winner)->takeover, c.lost == ClaimOutcome::kInProgress);
    EXPECT_EQ(hooks, 1);
    EXPECT_EQ(lost->outcome, c.lost);
    if (c.lost == ClaimOutcome::kInProgress) {
      EXPECT_EQ(lost->locked_until, (*winner)->locked_until);
    }
    // Only the winner holds the record.
    EXPECT_FALSE(
        store_->Complete(id, holder->token, Response{}).value_or(true));
    EXPECT_TRUE(
        other->Complete(id, (*winner)->token, Response{}).value_or(false));
  }
}

// Store.h's lost races: before each of the racer's scripts, another
// expired record takes the place of the one it read. After kClaimAttempts
// it answers kInProgress with locked_until = now, never an error.
TEST_F(RedisStoreTest, AClaimThatLosesEveryRaceIsInProgressUntilNow) {
  auto racer = MustOpenRedis(Uri());
  ASSERT_NE(racer, nullptr);
  auto plant = [&](int n) {
    ASSERT_EQ(RedisRaw(server_, {"SET", Key(Id(1)),
                                 InProgress(n, kT0, kT0 + seconds(1))})
                  .text,
              "OK");
  };
  plant(10);
  int hooks = 0;
  RedisStoreTestPeer::SetReclaimHook(*racer, [&](int attempt) {
    EXPECT_EQ(attempt, hooks);
    plant(11 + hooks++);
  });
  const TimePoint now = kT0 + seconds(5);
  auto claim = racer->Claim(Id(1), Fp(1), now, seconds(100), seconds(10));
  RedisStoreTestPeer::SetReclaimHook(*racer, nullptr);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kInProgress);
  EXPECT_EQ(claim->locked_until, now);
  EXPECT_EQ(hooks, RedisStore::kClaimAttempts);

  auto next = racer->Claim(Id(1), Fp(1), now, seconds(100), seconds(10));
  ASSERT_TRUE(next.has_value()) << next.error().ToString();
  EXPECT_EQ(next->outcome, ClaimOutcome::kAcquired);
  EXPECT_FALSE(next->takeover);
}

}  // namespace
}  // namespace idem
