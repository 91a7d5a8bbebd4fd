// The Redis store on the shared 3-master cluster
// (IDEM_TEST_REDIS_CLUSTER_URI): key slots as the server computes them,
// records spread over every master, one slot migrated by hand (-ASK, then
// -MOVED) and a slot range moved by redis-cli --cluster reshard, each while
// 8 threads claim.

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/open_store.h"
#include "idem/store.h"
#include "redis_cluster.h"
#include "redis_test_util.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using testing::RedisRaw;

const TimePoint kT0 = TimePoint(hours(24 * 365 * 56));

RecordId Id(int n) {
  RecordId id;
  for (int i = 0; i < 4; ++i)
    id.bytes[i] = static_cast<std::uint8_t>(n >> (8 * i));
  id.bytes[31] = 0xc1;
  return id;
}

class RedisClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IDEM_REQUIRE_TEST_REDIS_CLUSTER();
    base_ = testing::RedisClusterTestUri();
    servers_ = testing::RedisServersOf(base_);
    prefix_ = testing::UniqueRedisPrefix("cluster");
    auto store = OpenStore(base_ + "?prefix=" + prefix_ +
                               "&acquire_timeout_ms=120000&timeout_ms=60000",
                           {.sweep_interval = Duration::zero()});
    ASSERT_TRUE(store.has_value()) << store.error().ToString();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    if (!prefix_.empty()) testing::DeleteRedisKeys(base_, prefix_);
  }

  // Keys of ours on `server`.
  int KeysOn(const std::string& server) {
    int n = 0;
    std::string cursor = "0";
    do {
      auto scan = RedisRaw(
          server, {"SCAN", cursor, "MATCH", prefix_ + "*", "COUNT", "1000"});
      if (!scan.ok || scan.elements.empty()) return -1;
      cursor = scan.elements[0];
      n += static_cast<int>(scan.elements.size()) - 1;
    } while (cursor != "0");
    return n;
  }

  std::string NodeId(const std::string& server) {
    return RedisRaw(server, {"CLUSTER", "MYID"}).text;
  }

  // Whether every node agrees now about which node serves which slot
  // (redis-cli --cluster check).
  bool ClusterCheckPasses() {
    const std::string check =
        "redis-cli --cluster check " + servers_[0] + " >/dev/null 2>&1";
    return std::system(check.c_str()) == 0;
  }

  // Waits until they agree: a slot given back by hand is gossiped to the
  // nodes that did not take the SETSLOT themselves. True once they do.
  bool NodesAgree() {
    return testing::WaitFor([&] { return ClusterCheckPasses(); }, seconds(60),
                            std::chrono::milliseconds(200));
  }

  std::string base_, prefix_;
  std::vector<std::string> servers_;
  std::unique_ptr<Store> store_;
};

TEST_F(RedisClusterTest, KeySlotsAreTheServersSlots) {
  for (const std::string& key :
       {std::string("a"), std::string("{user1000}.following"),
        std::string("foo{}{bar}"), std::string("foo{{bar}}zap"),
        prefix_ + "{" + Id(1).ToHex() + "}",
        prefix_ + "{" + Id(2).ToHex() + "}",
        std::string("{") + Id(3).ToHex()}) {
    EXPECT_EQ(std::to_string(redis::KeySlot(key)),
              RedisRaw(servers_[0], {"CLUSTER", "KEYSLOT", key}).text)
        << key;
  }
}

TEST_F(RedisClusterTest, RecordsSpreadOverEveryMaster) {
  ASSERT_EQ(servers_.size(), 3u);
  constexpr int kIds = 300;
  for (int i = 0; i < kIds; ++i) {
    auto claim =
        store_->Claim(Id(i), Fingerprint{}, kT0, seconds(100), seconds(10));
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  }
  int total = 0;
  for (const std::string& server : servers_) {
    const int n = KeysOn(server);
    EXPECT_GT(n, kIds / 10) << server;
    total += n;
  }
  EXPECT_EQ(total, kIds);
  EXPECT_EQ(store_->Info().name, "redis-cluster");
  // Purge reaches every master.
  auto purged = store_->PurgeExpired(kT0 + seconds(100), 1000);
  ASSERT_TRUE(purged.has_value()) << purged.error().ToString();
  EXPECT_EQ(*purged, static_cast<std::size_t>(kIds));
}

// The one server (of servers_) that holds `key`'s slot: the others answer
// -MOVED. "" when none does.
std::string OwnerOf(const std::vector<std::string>& servers,
                    const std::string& key) {
  for (const std::string& server : servers) {
    if (RedisRaw(server, {"EXISTS", key}).text.rfind("-MOVED", 0) != 0) {
      return server;
    }
  }
  return "";
}

// Runs `threads` threads that each claim every id of `ids` once; returns
// how many times each was acquired, and counts errors.
std::map<int, int> ClaimFromThreads(Store& store, const std::vector<int>& ids,
                                    int threads, std::atomic<int>& errors,
                                    std::string& first_error) {
  std::mutex mu;
  std::map<int, int> acquired;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (std::size_t k = 0; k < ids.size(); ++k) {
        const int i = ids[(k + t * 5) % ids.size()];
        auto claim =
            store.Claim(Id(i), Fingerprint{}, kT0, seconds(100), seconds(10));
        std::lock_guard<std::mutex> lock(mu);
        if (!claim) {
          if (errors++ == 0) first_error = claim.error().ToString();
        } else if (claim->outcome == ClaimOutcome::kAcquired) {
          acquired[i]++;
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return acquired;
}

// One slot migrated by hand, as redis-cli does it: IMPORTING on the target,
// MIGRATING on the source, some keys moved (MIGRATE), then the slot given
// to the target (SETSLOT NODE). Mid-migration a key that is not on the
// source anymore (moved, or never there) answers -ASK; afterwards the
// source answers -MOVED.
TEST_F(RedisClusterTest, ClaimsFollowAskAndMovedWhileASlotMigrates) {
  ASSERT_EQ(servers_.size(), 3u);
  auto key = [&](int i) { return prefix_ + "{" + Id(i).ToHex() + "}"; };
  const int slot = redis::KeySlot(key(0));
  std::vector<int> ids;
  for (int i = 0; ids.size() < 24 && i < 16384 * 64; ++i) {
    if (redis::KeySlot(key(i)) == slot) ids.push_back(i);
  }
  ASSERT_EQ(ids.size(), 24u);
  const std::string source = OwnerOf(servers_, key(0));
  ASSERT_FALSE(source.empty());
  const std::string target = source == servers_[0] ? servers_[1] : servers_[0];
  const std::string source_id = NodeId(source), target_id = NodeId(target);
  const std::string slot_text = std::to_string(slot);

  // Ids 0..7 claimed before the migration, 0..3 of them moved by it.
  const std::vector<int> before(ids.begin(), ids.begin() + 8);
  for (int i : before) {
    ASSERT_TRUE(
        store_->Claim(Id(i), Fingerprint{}, kT0, seconds(100), seconds(10)));
  }
  ASSERT_EQ(RedisRaw(target,
                     {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", source_id})
                .text,
            "OK");
  ASSERT_EQ(RedisRaw(source,
                     {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", target_id})
                .text,
            "OK");
  const std::size_t colon = target.rfind(':');
  std::vector<std::string> migrate = {"MIGRATE",
                                      target.substr(0, colon),
                                      target.substr(colon + 1),
                                      "",
                                      "0",
                                      "30000",
                                      "KEYS"};
  for (int k = 0; k < 4; ++k) migrate.push_back(key(ids[k]));
  ASSERT_EQ(RedisRaw(source, migrate).text, "OK");

  std::atomic<int> errors{0};
  std::string first_error;
  auto acquired = ClaimFromThreads(*store_, ids, 8, errors, first_error);
  EXPECT_EQ(errors.load(), 0) << first_error;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    EXPECT_EQ(acquired[ids[k]], k < before.size() ? 0 : 1) << "id " << ids[k];
  }
  // New keys were created on the importing node (after ASKING).
  EXPECT_EQ(RedisRaw(target, {"CLUSTER", "COUNTKEYSINSLOT", slot_text}).text,
            std::to_string(4 + ids.size() - before.size()));
  // Stats reads every record mid-migration: the importing node lists keys
  // it answers -MOVED for, which are read again where the cluster says.
  auto stats = store_->Stats(kT0);
  ASSERT_TRUE(stats.has_value()) << stats.error().ToString();
  ASSERT_TRUE(stats->has_value());
  EXPECT_EQ((*stats)->in_progress, ids.size());
  EXPECT_EQ((*stats)->damaged, 0u);

  // Finish: move the rest, give the slot to the target everywhere.
  migrate.resize(7);
  for (int k = 4; k < 8; ++k) migrate.push_back(key(ids[k]));
  ASSERT_EQ(RedisRaw(source, migrate).text, "OK");
  for (const std::string& server : servers_) {
    ASSERT_EQ(
        RedisRaw(server, {"CLUSTER", "SETSLOT", slot_text, "NODE", target_id})
            .text,
        "OK")
        << server;
  }
  acquired = ClaimFromThreads(*store_, ids, 8, errors, first_error);
  EXPECT_EQ(errors.load(), 0) << first_error;
  EXPECT_TRUE(acquired.empty());

  // Leave the cluster as it was: the slot back to its source, empty.
  testing::DeleteRedisKeys(base_, prefix_);
  for (const std::string& server : {target, source}) {
    RedisRaw(server, {"CLUSTER", "SETSLOT", slot_text, "NODE", source_id});
  }
  for (const std::string& server : servers_) {
    RedisRaw(server, {"CLUSTER", "SETSLOT", slot_text, "NODE", source_id});
  }
  // The target's SETSLOT NODE raised its config epoch above the source's,
  // so a gossip message of the target's sent before it gave the slot back
  // would still win the slot back on a node that reads it late, and that
  // node then sends the next test's claims to the target, which sends them
  // back (-MOVED, until the store gives up). The source's epoch, raised
  // above every other, makes its claim the one that wins.
  const std::string bumped = RedisRaw(source, {"CLUSTER", "BUMPEPOCH"}).text;
  EXPECT_TRUE(bumped.rfind("BUMPED", 0) == 0 || bumped.rfind("STILL", 0) == 0)
      << bumped;
  EXPECT_TRUE(NodesAgree());
}

// While redis-cli moves slots (MIGRATING/IMPORTING, MIGRATE key by key,
// then SETSLOT NODE), claims meet -ASK and -MOVED; every id must still be
// acquired exactly once.
TEST_F(RedisClusterTest, EveryClaimHappensOnceWhileASlotRangeMoves) {
  ASSERT_EQ(servers_.size(), 3u);
  const std::string from = NodeId(servers_[0]);
  const std::string to = NodeId(servers_[1]);
  ASSERT_EQ(from.size(), 40u);
  ASSERT_EQ(to.size(), 40u);
  // A slot moved by an earlier test is given back by then.
  ASSERT_TRUE(NodesAgree());
  // Some records in place before the move, so that keys migrate.
  constexpr int kIds = 3000;
  constexpr int kThreads = 8;
  for (int i = 0; i < kIds; i += 2) {
    auto claimed =
        store_->Claim(Id(i), Fingerprint{}, kT0, seconds(100), seconds(10));
    ASSERT_TRUE(claimed.has_value())
        << "id " << i << ": " << claimed.error().ToString();
  }
  std::atomic<bool> moved{false};
  std::atomic<int> acquired[kIds] = {};
  std::atomic<int> errors{0};
  std::string first_error;
  std::mutex error_mu;
  // redis-cli refuses to reshard while the nodes do not agree about the
  // slots yet (the last move is still being gossiped): it waits for
  // `--cluster check` first, and tries a refused move again, with its
  // output kept for the failure message.
  auto reshard = [&](const std::string& a, const std::string& b) {
    const std::string log = "/tmp/idem-reshard-" + a + ".log";
    const std::string command = "redis-cli --cluster reshard " + servers_[0] +
                                " --cluster-from " + a + " --cluster-to " + b +
                                " --cluster-slots 600 --cluster-yes >" + log +
                                " 2>&1";
    int rc = -1;
    testing::WaitFor(
        [&] {
          if (!ClusterCheckPasses()) return false;
          rc = std::system(command.c_str());
          return rc == 0;
        },
        seconds(60), std::chrono::milliseconds(200));
    if (rc != 0) {
      std::system(("cat " + log).c_str());
    }
    std::remove(log.c_str());
    return rc;
  };
  std::thread mover([&] {
    EXPECT_EQ(reshard(from, to), 0);
    moved = true;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Every thread claims every odd id, in its own order, until the move
      // is over and it went through them all at least once.
      for (int round = 0; round < 1000; ++round) {
        for (int k = 0; k < kIds / 2; ++k) {
          const int i = 2 * ((k * 7 + t * 131) % (kIds / 2)) + 1;
          auto claim = store_->Claim(Id(i), Fingerprint{}, kT0, seconds(100),
                                     seconds(10));
          if (!claim) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (errors++ == 0) first_error = claim.error().ToString();
          } else if (claim->outcome == ClaimOutcome::kAcquired) {
            acquired[i]++;
          }
        }
        if (moved) break;
      }
    });
  }
  for (auto& t : threads) t.join();
  mover.join();
  EXPECT_EQ(errors.load(), 0) << first_error;
  for (int i = 1; i < kIds; i += 2) {
    ASSERT_EQ(acquired[i].load(), 1) << "id " << i;
  }
  // Every record, also the ones that migrated, is still there and held.
  for (int i = 0; i < kIds; ++i) {
    auto claim =
        store_->Claim(Id(i), Fingerprint{}, kT0, seconds(100), seconds(10));
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    ASSERT_EQ(claim->outcome, ClaimOutcome::kInProgress) << "id " << i;
  }
  EXPECT_EQ(reshard(to, from), 0);  // Leave the cluster as it was.
}

}  // namespace
}  // namespace idem
