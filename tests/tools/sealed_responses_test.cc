// Sealed stored responses end to end: idem-demo processes with
// --response-keys on every durable store, the store's own bytes read back
// (files, table rows, Redis values) to see that a known marker of the
// response is nowhere in them — and is there without the keys, which shows
// that the reading would find it; replays across a restart, a removed key
// (500 damaged, logged by record and key id, never the key), idemctl
// inspect with and without --response-keys, the key file's checks, and
// --fingerprint-fields and X-Idempotency-Expires over HTTP.
//
// PostgreSQL and Redis come from IDEM_TEST_POSTGRES_URI,
// IDEM_TEST_REDIS_URI and IDEM_TEST_REDIS_CLUSTER_URI (without them those
// cases skip, and under CI fail). IDEMCTL_PATH and IDEM_DEMO_PATH are set
// by CMake.

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/record_id.h"
#include "idemctl_process.h"
#include "support/built_path.h"
#include "support/demo_process.h"
#include "support/temp_dir.h"
#include "tool_store.h"
#ifdef IDEM_IDEMCTL_TEST_POSTGRES
#include "postgres_test_util.h"
#endif
#ifdef IDEM_IDEMCTL_TEST_REDIS
#include "redis_test_util.h"
#endif

namespace idem::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kOldHex = std::string(60, '1') + "beef";
const std::string kNewHex = std::string(60, '2') + "cafe";

std::string Hex(std::string_view s) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// A key file with mode `mode`.
std::string KeyFile(const TempDir& dir, const std::string& name,
                    const std::string& text, mode_t mode = 0600) {
  const std::string path = (dir.path() / name).string();
  std::ofstream(path) << text;
  EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  return path;
}

class SealedStoreTest : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    store_.SetUp(GetParam(), "sealed");
    if (IsSkipped() || HasFatalFailure()) return;
    uri_ = store_.uri();
    keys_ = KeyFile(dir_, "keys", "old:" + kOldHex + "\n");
  }

  void TearDown() override { store_.TearDown(); }

  // Every byte the store holds, as this test can read it: the files of an
  // embedded store (-wal and -shm included), the table's rows as text
  // (bytea in hex), the values of the prefix's keys on every server.
  std::string StoreBytes() {
    std::string all;
    switch (GetParam()) {
      case Kind::kRocksdb:
      case Kind::kSqlite:
        for (const auto& entry : std::filesystem::recursive_directory_iterator(
                 store_.dir().path())) {
          if (entry.is_regular_file()) all += FileBytes(entry.path());
        }
        break;
      case Kind::kPostgres:
#ifdef IDEM_IDEMCTL_TEST_POSTGRES
        for (const auto& row : PostgresQuery(
                 uri_, "SELECT t::text FROM " + store_.table_ + " t")) {
          for (const std::string& cell : row) all += cell + "\n";
        }
#endif
        break;
      case Kind::kRedis:
      case Kind::kRedisCluster:
#ifdef IDEM_IDEMCTL_TEST_REDIS
        for (const std::string& server : RedisServersOf(store_.redis_base_)) {
          const RawReply keys =
              RedisRaw(server, {"KEYS", store_.redis_prefix_ + "*"});
          for (const std::string& key : keys.elements) {
            all += key + "\n" + RedisRaw(server, {"GET", key}).text + "\n";
          }
        }
#endif
        break;
    }
    return all;
  }

  // Whether `marker` is in the store's bytes, as text or (PostgreSQL's
  // bytea) as hex.
  bool StoreHolds(const std::string& marker) {
    const std::string bytes = StoreBytes();
    return bytes.find(marker) != std::string::npos ||
           bytes.find(Hex(marker)) != std::string::npos;
  }

  std::unique_ptr<proc::DemoProcess> StartDemo(
      std::vector<std::string> args = {}) {
    auto demo = std::make_unique<proc::DemoProcess>(
        ::idem::testing::BuiltPath(IDEM_DEMO_PATH), uri_,
        dir_.path() / "demo.log", args);
    port_ = demo->WaitListening();
    EXPECT_NE(port_, 0) << proc::ReadFile(dir_.path() / "demo.log");
    return demo;
  }

  std::optional<proc::HttpResponse> Post(const std::string& key,
                                         const std::string& marker) {
    return proc::Send(port_, "POST", "/orders", key,
                      "{\"item\":\"" + marker + "\"}");
  }

  std::string Log() { return proc::ReadFile(dir_.path() / "demo.log"); }

  // The key files and the log; an embedded store's files are in store_'s.
  TempDir dir_{"idem-sealed"};
  ToolStore store_;
  std::string uri_;
  std::string keys_;
  std::uint16_t port_ = 0;
};

TEST_P(SealedStoreTest, TheStoreHoldsNothingOfASealedResponse) {
  {  // Without keys the marker is in the store: the reading finds it.
    auto demo = StartDemo();
    auto plain = Post("plain", "plain-marker-7f3a");
    ASSERT_EQ(plain ? plain->status : 0, 201) << proc::Describe(plain);
    EXPECT_TRUE(StoreHolds("plain-marker-7f3a"));
    demo->Kill();
  }
  auto demo = StartDemo({"--response-keys", keys_});
  auto first = Post("sealed", "sealed-marker-9c2e");
  ASSERT_EQ(first ? first->status : 0, 201) << proc::Describe(first);
  EXPECT_THAT(first->body, HasSubstr("sealed-marker-9c2e"));
  auto replay = Post("sealed", "sealed-marker-9c2e");
  ASSERT_TRUE(replay) << proc::Describe(replay);
  EXPECT_EQ(replay->body, first->body);
  EXPECT_EQ(replay->Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(replay->Header("Location"), first->Header("Location"));
  EXPECT_FALSE(StoreHolds("sealed-marker-9c2e"));
  // The plain record from before still replays.
  auto old = Post("plain", "plain-marker-7f3a");
  EXPECT_EQ(old ? old->Header("Idempotent-Replayed") : "", "true");
  demo->Kill();
  EXPECT_FALSE(StoreHolds("sealed-marker-9c2e"));
  EXPECT_THAT(Log(), Not(HasSubstr(kOldHex)));

  // idemctl: without the keys, the status and state but not the body.
  const std::vector<std::string> inspect = {"--store", uri_,     "inspect",
                                            "--key",   "sealed", "--body"};
  const ToolResult sealed =
      RunTool(::idem::testing::BuiltPath(IDEMCTL_PATH), inspect);
  ASSERT_EQ(sealed.exit_code, 0) << Describe(sealed);
  EXPECT_THAT(sealed.out, HasSubstr("state: completed"));
  EXPECT_THAT(sealed.out, HasSubstr("status: 201"));
  EXPECT_THAT(sealed.out, HasSubstr("sealed: key old"));
  EXPECT_THAT(sealed.out, HasSubstr("headers and body: sealed (pass "
                                    "--response-keys FILE"));
  EXPECT_THAT(sealed.out, Not(HasSubstr("sealed-marker-9c2e")));
  std::vector<std::string> with_keys = inspect;
  with_keys.insert(with_keys.end(), {"--response-keys", keys_});
  const ToolResult opened =
      RunTool(::idem::testing::BuiltPath(IDEMCTL_PATH), with_keys);
  ASSERT_EQ(opened.exit_code, 0) << Describe(opened);
  EXPECT_THAT(opened.out, HasSubstr("sealed-marker-9c2e"));
  EXPECT_THAT(opened.out, HasSubstr("header: Location: /orders/"));
  EXPECT_THAT(opened.out + opened.err, Not(HasSubstr(kOldHex)));
  // A ring without the sealing key: damaged, exit 3, named by key id.
  with_keys.back() = KeyFile(dir_, "new", "new:" + kNewHex + "\n");
  const ToolResult wrong =
      RunTool(::idem::testing::BuiltPath(IDEMCTL_PATH), with_keys);
  EXPECT_EQ(wrong.exit_code, 3) << Describe(wrong);
  EXPECT_THAT(wrong.err, HasSubstr("key id old"));
  EXPECT_THAT(wrong.err, HasSubstr("idemctl revoke --record-id"));
  EXPECT_THAT(wrong.out + wrong.err, Not(HasSubstr(kNewHex)));
}

INSTANTIATE_TEST_SUITE_P(Stores, SealedStoreTest,
                         ::testing::Values(Kind::kRocksdb, Kind::kSqlite,
                                           Kind::kPostgres, Kind::kRedis,
                                           Kind::kRedisCluster),
                         [](const auto& info) { return KindName(info.param); });

// --- One RocksDB directory across demo restarts ----------------------------

class SealedRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef IDEM_IDEMCTL_TEST_ROCKSDB
    GTEST_SKIP() << "this build has no RocksDB store";
#endif
  }
  std::unique_ptr<proc::DemoProcess> Start(const std::string& keys) {
    auto demo = std::make_unique<proc::DemoProcess>(
        ::idem::testing::BuiltPath(IDEM_DEMO_PATH), uri_, log_,
        std::vector<std::string>{"--response-keys", keys});
    port_ = demo->WaitListening();
    EXPECT_NE(port_, 0) << proc::ReadFile(log_);
    return demo;
  }
  std::optional<proc::HttpResponse> Post() {
    return proc::Send(port_, "POST", "/orders", "order-1",
                      R"({"item":"restart-marker"})");
  }

  TempDir dir_{"idem-sealed-restart"};
  const std::string uri_ = "rocksdb:" + (dir_.path() / "db").string();
  const std::filesystem::path log_ = dir_.path() / "demo.log";
  std::uint16_t port_ = 0;
};

TEST_F(SealedRestartTest, RotationReplaysAndARemovedKeyIsDamage) {
  const std::string old_only = KeyFile(dir_, "old", "old:" + kOldHex + "\n");
  auto demo = Start(old_only);
  auto first = Post();
  ASSERT_EQ(first ? first->status : 0, 201) << proc::Describe(first);
  demo->Kill();

  // A new first key, the old one kept: the old record replays.
  demo = Start(
      KeyFile(dir_, "rotated", "new:" + kNewHex + "\nold:" + kOldHex + "\n"));
  auto replay = Post();
  ASSERT_TRUE(replay) << proc::Describe(replay);
  EXPECT_EQ(replay->status, 201);
  EXPECT_EQ(replay->body, first->body);
  EXPECT_EQ(replay->Header("Idempotent-Replayed"), "true");
  demo->Kill();

  // The old key removed: 500 damaged, never a rerun, never the key logged.
  demo = Start(KeyFile(dir_, "new", "new:" + kNewHex + "\n"));
  auto damaged = Post();
  ASSERT_TRUE(damaged) << proc::Describe(damaged);
  EXPECT_EQ(damaged->status, 500);
  EXPECT_THAT(damaged->body, HasSubstr("idempotency_record_damaged"));
  EXPECT_EQ(proc::HandlerRuns(port_), 0);
  demo->Kill();
  const std::string log = proc::ReadFile(log_);
  EXPECT_THAT(log, HasSubstr(MakeRecordId("", "order-1").ToHex()));
  EXPECT_THAT(log, HasSubstr("key id old"));
  EXPECT_THAT(log, Not(HasSubstr(kOldHex)));
  EXPECT_THAT(log, Not(HasSubstr(kNewHex)));
}

// --- The demo's flags -------------------------------------------------------

TEST(SealedFlagsTest, AKeyFileOthersCanReadIsRefused) {
  TempDir dir;
  const std::string keys = KeyFile(dir, "keys", "k1:" + kOldHex + "\n", 0644);
  const ToolResult r = RunTool(::idem::testing::BuiltPath(IDEM_DEMO_PATH),
                               {"--store", "memory:", "--listen", "127.0.0.1:0",
                                "--response-keys", keys});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("--response-keys"));
  EXPECT_THAT(r.err, HasSubstr("chmod 600"));
  const ToolResult ctl =
      RunTool(::idem::testing::BuiltPath(IDEMCTL_PATH),
              {"--store", "sqlite:" + (dir.path() / "x.db").string(), "inspect",
               "--key", "k", "--response-keys", keys});
  EXPECT_EQ(ctl.exit_code, 2) << Describe(ctl);
  EXPECT_THAT(ctl.err, HasSubstr("--response-keys"));
}

TEST(SealedFlagsTest, AMalformedKeyLineIsNamedWithoutItsKey) {
  TempDir dir;
  const std::string short_key = kNewHex.substr(2);
  const std::string keys =
      KeyFile(dir, "keys", "k1:" + kOldHex + "\nk2:" + short_key + "\n");
  const ToolResult r = RunTool(::idem::testing::BuiltPath(IDEM_DEMO_PATH),
                               {"--store", "memory:", "--listen", "127.0.0.1:0",
                                "--response-keys", keys});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("--response-keys"));
  EXPECT_THAT(r.err, HasSubstr("line 2"));
  EXPECT_THAT(r.out + r.err, Not(HasSubstr(short_key)));
  EXPECT_THAT(r.out + r.err, Not(HasSubstr(kOldHex)));
}

TEST(SealedFlagsTest, AMalformedFingerprintFieldIsNamed) {
  const ToolResult r = RunTool(::idem::testing::BuiltPath(IDEM_DEMO_PATH),
                               {"--store", "memory:", "--listen", "127.0.0.1:0",
                                "--fingerprint-fields", "/item,customer"});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("--fingerprint-fields"));
  EXPECT_THAT(r.err, HasSubstr("\"customer\""));
}

// --- Fingerprint fields and the expiry header over HTTP --------------------

TEST(SealedHttpTest, FingerprintFieldsAndTheExpiryHeader) {
  TempDir dir;
  proc::DemoProcess demo(::idem::testing::BuiltPath(IDEM_DEMO_PATH),
                         "memory:", dir.path() / "demo.log",
                         {"--fingerprint-fields", "/item", "--ttl", "3600"});
  const std::uint16_t port = demo.WaitListening();
  ASSERT_NE(port, 0) << proc::ReadFile(dir.path() / "demo.log");
  auto first = proc::Send(port, "POST", "/orders", "fp-1",
                          R"({"item":"book","sent_at":"10:00:00"})");
  ASSERT_EQ(first ? first->status : 0, 201) << proc::Describe(first);
  EXPECT_EQ(first->Header("X-Idempotency-Expires"), "");  // Not a replay.
  // Another member differs: the same request, replayed.
  auto retry = proc::Send(port, "POST", "/orders", "fp-1",
                          R"({"sent_at":"10:00:07","item":"book"})");
  ASSERT_TRUE(retry) << proc::Describe(retry);
  EXPECT_EQ(retry->status, 201);
  EXPECT_EQ(retry->Header("Idempotent-Replayed"), "true");
  EXPECT_EQ(retry->body, first->body);
  const std::string expires = retry->Header("X-Idempotency-Expires");
  EXPECT_TRUE(std::regex_match(
      expires, std::regex("(Mon|Tue|Wed|Thu|Fri|Sat|Sun), [0-9]{2} "
                          "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
                          "[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2} GMT")))
      << expires;
  // The named member differs: the key was reused for another request.
  auto other = proc::Send(port, "POST", "/orders", "fp-1", R"({"item":"pen"})");
  EXPECT_EQ(other ? other->status : 0, 422) << proc::Describe(other);
  // A body that is not JSON has no members to identify it by: 400.
  auto form = proc::Send(port, "POST", "/orders", "fp-3", "item=book");
  ASSERT_EQ(form ? form->status : 0, 400) << proc::Describe(form);
  EXPECT_NE(form->body.find("idempotency_body_not_json"), std::string::npos)
      << form->body;
  // /payments keeps the whole body.
  auto pay = proc::Send(port, "POST", "/payments", "fp-2", R"({"a":1,"b":1})");
  ASSERT_EQ(pay ? pay->status : 0, 201) << proc::Describe(pay);
  auto pay2 = proc::Send(port, "POST", "/payments", "fp-2", R"({"a":1,"b":2})");
  EXPECT_EQ(pay2 ? pay2->status : 0, 422) << proc::Describe(pay2);
  EXPECT_EQ(proc::HandlerRuns(port), 2);
}

}  // namespace
}  // namespace idem::testing
