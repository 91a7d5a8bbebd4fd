// The Guard with sealed, compressed and hooked stored responses
// (GuardOptions::response_keys, compress_stored_above, on_replay;
// SEMANTICS.md rows "Sealed stored responses" and "Replay hook"), over the
// memory store and the test baseline store. Fingerprint fields are
// guard_fingerprint_fields_test.cc.

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baseline/sharded_mutex_store.h"
#include "idem/guard.h"
#include "idem/memory_store.h"
#include "idem/record_id.h"
#include "idem/replay_info.h"
#include "idem/response_keys.h"
#include "idem/stored_response.h"
#include "support/guard_client.h"
#include "support/log_capture.h"

namespace idem {
namespace {

using ::testing::Each;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kScope = "tenant-a";
constexpr std::string_view kMarker = "secret-card-token-4111";
const std::string kOldHex(64, 'c');
const std::string kNewHex(64, 'd');

std::shared_ptr<const ResponseKeyRing> Ring(const std::string& text) {
  auto ring = ResponseKeyRing::Parse(text);
  EXPECT_TRUE(ring.has_value()) << ring.error().ToString();
  return ring ? *ring : nullptr;
}

class GuardStoredResponseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>();
    store_ = std::make_shared<bench::ShardedMutexStore>();
  }

  // A guard over the same store (and clock) as before: a restart.
  void Start(GuardOptions options) {
    guard_.reset();
    GuardSetup setup;
    setup.store = store_;
    setup.options = std::move(options);
    setup.clock = clock_;
    setup.log = testing::CaptureLogs(logs_);
    setup.log_repeat_interval = Duration::zero();
    auto guard = Guard::Create(std::move(setup));
    ASSERT_TRUE(guard.has_value()) << guard.error().ToString();
    guard_ = std::move(*guard);
  }

  static GuardOptions Sealing(const std::string& ring_text) {
    GuardOptions o;
    o.response_keys = Ring(ring_text);
    return o;
  }

  // One request; the handler answers `answer` when it runs.
  Response Send(const std::string& key, const std::string& body,
                const Response& answer,
                std::shared_ptr<const GuardOptions> route = nullptr) {
    return idem::testing::PostOrder(*guard_, key, body, kScope, answer, runs_,
                                    std::move(route));
  }

  static Response Secret() {
    return Response{201,
                    {{"Content-Type", "application/json"}},
                    "{\"token\":\"" + std::string(kMarker) + "\"}"};
  }

  std::shared_ptr<const Response> StoredOf(const std::string& key) {
    auto record = store_->Inspect(MakeRecordId(kScope, key), clock_->Now());
    EXPECT_TRUE(record.has_value() && record->has_value());
    return record && *record ? (*record)->response : nullptr;
  }

  // Writes `response` as the completed record of `key` with the fingerprint
  // of `body` (as an attacker or a broken disk would).
  void Plant(const std::string& key, const Fingerprint& fp,
             const Response& response) {
    const RecordId id = MakeRecordId(kScope, key);
    ASSERT_TRUE(store_->Revoke(id).has_value());
    auto claimed = store_->Claim(id, fp, clock_->Now(), std::chrono::hours(1),
                                 std::chrono::seconds(60));
    ASSERT_TRUE(claimed.has_value());
    ASSERT_TRUE(*store_->Complete(id, claimed->token, response));
  }

  Fingerprint FingerprintOf(const std::string& key) {
    auto record = store_->Inspect(MakeRecordId(kScope, key), clock_->Now());
    return record && *record ? (*record)->fingerprint : Fingerprint{};
  }

  void ExpectNoKeyInLogs() {
    EXPECT_THAT(logs_, Each(Not(HasSubstr(kOldHex))));
    EXPECT_THAT(logs_, Each(Not(HasSubstr(kNewHex))));
  }

  std::shared_ptr<ManualClock> clock_;
  std::shared_ptr<Store> store_;
  std::vector<std::string> logs_;
  std::unique_ptr<Guard> guard_;
  int runs_ = 0;
};

// --- Sealing ----------------------------------------------------------------

TEST_F(GuardStoredResponseTest, ASealedResponseReplaysAndIsNotStoredInClear) {
  Start(Sealing("old:" + kOldHex));
  EXPECT_EQ(Send("k", "{}", Secret()), Secret());
  const Response replay = Send("k", "{}", Secret());
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(replay.body, Secret().body);
  EXPECT_EQ(replay.FindHeader("Content-Type"), "application/json");
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(replay.FindHeader(kStoredResponseHeader), std::nullopt);
  const auto stored = StoredOf("k");
  ASSERT_NE(stored, nullptr);
  EXPECT_EQ(stored->status, 201);  // In clear: idemctl shows it.
  EXPECT_THAT(stored->body, Not(HasSubstr(kMarker)));
  EXPECT_THAT(stored->body, Not(HasSubstr("application/json")));
  EXPECT_EQ(SealingKeyId(*stored), "old");
  ExpectNoKeyInLogs();
}

TEST_F(GuardStoredResponseTest, ARouteWithoutItsOwnKeysSealsWithTheGuards) {
  Start(Sealing("old:" + kOldHex));
  auto route = Guard::MakeRouteOptions(GuardOptions{});
  ASSERT_TRUE(route.has_value());
  Send("k", "{}", Secret(), *route);
  EXPECT_EQ(SealingKeyId(*StoredOf("k")), "old");
  EXPECT_EQ(Send("k", "{}", Secret(), *route).body, Secret().body);
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardStoredResponseTest, RotationReplaysRecordsSealedWithTheOldKey) {
  Start(Sealing("old:" + kOldHex));
  Send("before", "{}", Secret());
  Start(Sealing("new:" + kNewHex + "\nold:" + kOldHex));
  EXPECT_EQ(Send("before", "{}", Secret()).body, Secret().body);
  Send("after", "{}", Secret());
  EXPECT_EQ(runs_, 2);
  EXPECT_EQ(SealingKeyId(*StoredOf("before")), "old");
  EXPECT_EQ(SealingKeyId(*StoredOf("after")), "new");
  ExpectNoKeyInLogs();
}

TEST_F(GuardStoredResponseTest, ARemovedKeyMakesItsRecordsDamaged) {
  Start(Sealing("old:" + kOldHex));
  Send("k", "{}", Secret());
  Start(Sealing("new:" + kNewHex));
  const Response answer = Send("k", "{}", Secret());
  EXPECT_EQ(answer.status, 500);
  EXPECT_THAT(answer.body, HasSubstr("idempotency_record_damaged"));
  EXPECT_THAT(answer.body, Not(HasSubstr(kMarker)));
  EXPECT_EQ(runs_, 1);  // Never a silent rerun.
  EXPECT_EQ(guard_->metrics().Get(Outcome::kRecordDamaged), 1u);
  ASSERT_EQ(logs_.size(), 1u);
  EXPECT_THAT(logs_[0],
              HasSubstr(MakeRecordId(kScope, "k").ToHex()));  // The record,
  EXPECT_THAT(logs_[0], HasSubstr("key id old"));             // the key id,
  ExpectNoKeyInLogs();                                        // not the key.
  // Sealing switched off: the sealed record still does not replay garbage.
  Start(GuardOptions{});
  EXPECT_EQ(Send("k", "{}", Secret()).status, 500);
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardStoredResponseTest, AFlippedBitInTheSealedPartIsDamage) {
  Start(Sealing("old:" + kOldHex));
  Send("k", "{}", Secret());
  Response tampered = *StoredOf("k");
  tampered.body[tampered.body.size() / 2] ^= 0x20;
  Plant("k", FingerprintOf("k"), tampered);
  const Response answer = Send("k", "{}", Secret());
  EXPECT_EQ(answer.status, 500);
  EXPECT_THAT(answer.body, HasSubstr("idempotency_record_damaged"));
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardStoredResponseTest, ASealedResponseMovedToAnotherRecordIsDamage) {
  Start(Sealing("old:" + kOldHex));
  Send("victim", "{}", Secret());
  Send("attacker", "{}", Response{201, {}, "mine"});
  // Same request fingerprint, other record: the associated data differs.
  Plant("attacker", FingerprintOf("attacker"), *StoredOf("victim"));
  const Response answer = Send("attacker", "{}", Secret());
  EXPECT_EQ(answer.status, 500);
  EXPECT_THAT(answer.body, Not(HasSubstr(kMarker)));
  EXPECT_EQ(runs_, 2);
}

TEST_F(GuardStoredResponseTest, PlainRecordsFromBeforeSealingStillReplay) {
  Start(GuardOptions{});
  Send("k", "{}", Secret());
  Start(Sealing("old:" + kOldHex));
  EXPECT_EQ(Send("k", "{}", Secret()).body, Secret().body);
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardStoredResponseTest, ConcurrentSealedRequestsReplayTheirOwn) {
  // Sealing and compression keep per-thread contexts: many threads at once,
  // each replaying its own responses (and TSan watching).
  GuardOptions o = Sealing("old:" + kOldHex);
  o.compress_stored_above = 64;
  auto memory = MemoryStore::Open({});
  ASSERT_TRUE(memory.has_value());
  store_ = std::shared_ptr<Store>(std::move(*memory));
  Start(o);
  constexpr int kThreads = 6, kKeys = 40;
  std::vector<int> wrong(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kKeys; ++k) {
        const std::string key = std::to_string(t) + "-" + std::to_string(k);
        const Response answer{201, {}, std::string(200, 'a' + t) + key};
        std::vector<HeaderView> headers{{"Idempotency-Key", key}};
        RequestView view;
        view.method = "POST";
        view.target = "/orders";
        view.headers = headers;
        view.body = "{}";
        for (int round = 0; round < 2; ++round) {
          const Response got = guard_->Run(view, [&] { return answer; });
          if (got.body != answer.body) ++wrong[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(wrong, Each(0));
  EXPECT_EQ(guard_->metrics().Get(Outcome::kReplayed),
            static_cast<std::uint64_t>(kThreads * kKeys));
}

// --- Compression ------------------------------------------------------------

std::string JsonOf(std::size_t size) {
  std::string body = "[";
  for (int i = 0; body.size() < size; ++i) {
    body += "{\"order\":" + std::to_string(i) + ",\"state\":\"paid\"},";
  }
  body.back() = ']';
  return body;
}

TEST_F(GuardStoredResponseTest, TheMemoryStoreIsChargedTheCompressedSize) {
  auto memory = MemoryStore::Open({});
  ASSERT_TRUE(memory.has_value());
  std::shared_ptr<MemoryStore> mem = std::move(*memory);
  store_ = mem;
  const Response big{200, {}, JsonOf(64 << 10)};
  GuardOptions plain;
  plain.compress_stored_above = 0;
  Start(plain);
  std::size_t before = mem->bytes();
  Send("plain", "{}", big);
  const std::size_t plain_bytes = mem->bytes() - before;
  EXPECT_GT(plain_bytes, big.body.size());
  Start(GuardOptions{});  // Default: compressed above 1 KiB.
  before = mem->bytes();
  Send("packed", "{}", big);
  const std::size_t packed_bytes = mem->bytes() - before;
  EXPECT_LT(packed_bytes * 5, plain_bytes);
  EXPECT_EQ(packed_bytes, MemoryStore::kRecordBytes +
                              MemoryStore::ResponseBytes(*StoredOf("packed")));
  EXPECT_EQ(Send("packed", "{}", big).body, big.body);
  EXPECT_EQ(runs_, 2);
}

TEST_F(GuardStoredResponseTest, MaxStoredResponseBoundsTheUncompressedBody) {
  GuardOptions o;
  o.max_stored_response = 4096;
  Start(o);
  const Response big{200, {}, JsonOf(8192)};  // Compresses far below 4 KiB.
  Send("k", "{}", big);
  Send("k", "{}", big);
  EXPECT_EQ(runs_, 2);  // Not stored: 8 KiB is over the limit.
  EXPECT_EQ(guard_->metrics().Get(Outcome::kNotStored), 2u);
}

TEST(GuardStoredResponseOptionsTest, ACompressionLevelOutOfRangeIsNamed) {
  GuardOptions o;
  o.compression_level = 20;
  EXPECT_THAT(o.Validate().error().message(), HasSubstr("compression_level"));
}

// --- The replay hook --------------------------------------------------------

TEST_F(GuardStoredResponseTest, TheHookSeesTheRecordsTimes) {
  GuardOptions o;
  o.ttl = std::chrono::hours(2);
  std::vector<ReplayInfo> seen;
  o.on_replay = [&seen](const ReplayInfo& info, Headers& headers) {
    seen.push_back(info);
    headers.emplace_back(
        "X-Expires-In",
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                           *info.expires_at - *info.created_at)
                           .count()));
  };
  Start(o);
  const TimePoint claimed = clock_->Now();
  EXPECT_EQ(Send("k", "{}", Secret()).FindHeader("X-Expires-In"),
            std::nullopt);  // Not a replay.
  clock_->Advance(std::chrono::minutes(5));
  const Response replay = Send("k", "{}", Secret());
  EXPECT_EQ(replay.FindHeader("X-Expires-In"), "7200");
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].record_id, MakeRecordId(kScope, "k"));
  EXPECT_EQ(seen[0].status, 201);
  EXPECT_EQ(seen[0].created_at, claimed);
  EXPECT_EQ(seen[0].completed_at, claimed);
  EXPECT_EQ(seen[0].expires_at, claimed + std::chrono::hours(2));
  auto record = store_->Inspect(MakeRecordId(kScope, "k"), clock_->Now());
  EXPECT_EQ(seen[0].expires_at, (*record)->expires_at);
}

TEST_F(GuardStoredResponseTest, APlainRecordGivesTheHookNoTimes) {
  Start(GuardOptions{});
  Send("k", "{}", Secret());
  GuardOptions o;
  std::optional<ReplayInfo> seen;
  o.on_replay = [&seen](const ReplayInfo& info, Headers&) { seen = info; };
  Start(o);
  Send("k", "{}", Secret());
  ASSERT_TRUE(seen.has_value());
  EXPECT_FALSE(seen->created_at || seen->completed_at || seen->expires_at);
  EXPECT_EQ(runs_, 1);
}

TEST_F(GuardStoredResponseTest, AHookThatThrowsLeavesTheReplayAsItWas) {
  GuardOptions o;
  o.on_replay = [](const ReplayInfo&, Headers& headers) {
    headers.emplace_back("X-Half", "done");
    headers.clear();
    throw std::runtime_error("clock unavailable");
  };
  Start(o);
  Send("k", "{}", Secret());
  const Response replay = Send("k", "{}", Secret());
  EXPECT_EQ(replay.status, 201);
  EXPECT_EQ(replay.body, Secret().body);
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(replay.FindHeader("Content-Type"), "application/json");
  EXPECT_EQ(replay.FindHeader("X-Half"), std::nullopt);
  EXPECT_EQ(runs_, 1);
  ASSERT_EQ(logs_.size(), 1u);
  EXPECT_THAT(logs_[0], HasSubstr("on_replay threw (clock unavailable)"));
  EXPECT_THAT(logs_[0], HasSubstr(MakeRecordId(kScope, "k").ToHex()));
}

}  // namespace
}  // namespace idem
