// RocksDB-store-only tests: what the contract suite cannot see from the
// Store interface. Records survive reopening; corrupted values are kDataLoss;
// the compaction filter really drops expired records from the files; a held
// directory is kUnavailable (also when another process holds it); URI
// parameters; the block cache serves repeated replays; the client key never
// reaches the files.
//
// The tests look at the files through RocksDB itself (a raw DB opened on the
// store's directory after the store is closed), never through the store.
// Only the sweeper test waits for real time (a 10 ms interval), in a bounded
// polling loop; no other test reads the real clock or sleeps.

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/perf_context.h>
#include <rocksdb/perf_level.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "rocksdb_call.h"
#include "support/durable_store.h"
#include "support/full_disk.h"
#include "support/ids.h"
#include "support/store_times.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/open_store.h"
#include "idem/rocksdb_store.h"
#include "idem/store.h"
#include "idem/store/forwarding_store.h"
#include "idem/store/record_codec.h"
#include "idem/store_uri.h"
#include "idem/sweeper.h"
#include "idem/testing/store_contract.h"
#include "idem/testing/through_async_calls.h"
#include "support/secret_request.h"
#include "support/store_uri_checks.h"

extern char** environ;

namespace idem {
namespace {

using testing::SomeResponse;
using testing::TempDir;
using testing::TestFingerprint;
using testing::TestId;
using testing::WaitFor;

using std::chrono::hours;
using std::chrono::seconds;
using ::testing::HasSubstr;

using testing::kLock;
using testing::kT0;
using testing::kTtl;

// The helper test below runs in a child process when this is set: it opens
// the store at the directory named here and holds it until its stdin closes.
constexpr char kHoldEnv[] = "IDEM_ROCKSDB_TEST_HOLD_DIR";
constexpr char kHeldLine[] = "idem-rocksdb-test: held";

class RocksdbStoreTest : public ::testing::Test {
 protected:
  RocksdbStoreTest() : clock_(std::make_shared<ManualClock>(kT0)) {}

  std::string DbPath() const { return (dir_.path() / "db").string(); }

  std::unique_ptr<RocksdbStore> OpenStore(bool sync = false) {
    return OpenStoreWith({.sync = sync});
  }

  // OpenStore with other options; options.path is set here.
  std::unique_ptr<RocksdbStore> OpenStoreWith(RocksdbStoreOptions options) {
    options.path = DbPath();
    StoreOptions store_options;
    store_options.clock = clock_;
    auto store = RocksdbStore::Open(options, store_options);
    EXPECT_TRUE(store.has_value()) << store.error().ToString();
    return store ? std::move(*store) : nullptr;
  }

  // The store must be closed: RocksDB allows one open DB per directory.
  // Runs `fn` on a raw DB with both column families open.
  template <typename Fn>
  void WithRawDb(Fn&& fn) {
    // Through the store's own call wrapper: under ThreadSanitizer RocksDB's
    // background threads (one pool per process, shared with the stores the
    // test opens) read what this open wrote, synchronized by locks TSan
    // cannot see (rocksdb_call.h, rocksdb_call.cc).
    rocksdb_internal::RocksdbCall([&] { RawDbSession(fn); });
  }

  template <typename Fn>
  void RawDbSession(Fn& fn) {
    rocksdb::DBOptions options;
    const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
        {RocksdbStore::kColumnFamily, rocksdb::ColumnFamilyOptions()}};
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    const rocksdb::Status s =
        rocksdb::DB::Open(options, DbPath(), families, &handles, &raw);
    ASSERT_TRUE(s.ok()) << s.ToString();
    fn(*raw, handles[1]);
    for (auto* h : handles) ASSERT_TRUE(raw->DestroyColumnFamilyHandle(h).ok());
    ASSERT_TRUE(raw->Close().ok());
    delete raw;
  }

  std::size_t CountKeys() {
    std::size_t n = 0;
    WithRawDb([&](rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf) {
      std::unique_ptr<rocksdb::Iterator> it(
          db.NewIterator(rocksdb::ReadOptions(), cf));
      for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
      EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    });
    return n;
  }

  TempDir dir_{"idem-rocksdb"};
  std::shared_ptr<ManualClock> clock_;
};

// ClaimAsync's answer, and whether it came inside the call: on the calling
// thread (which only the call itself can have answered on, since the
// caller waits here afterwards) rather than on the store's thread.
struct AsyncClaim {
  Result<ClaimResult> result;
  bool inside_the_call = false;
};

AsyncClaim ClaimAsyncOn(Store& store, const RecordId& id, const Fingerprint& fp,
                        TimePoint now) {
  std::promise<std::pair<Result<ClaimResult>, std::thread::id>> answer;
  auto answered = answer.get_future();
  store.ClaimAsync(id, fp, now, kTtl, kLock, [&](Result<ClaimResult> r) {
    answer.set_value({std::move(r), std::this_thread::get_id()});
  });
  // Generous: the store's thread may be slow to run on a loaded machine.
  if (answered.wait_for(std::chrono::minutes(1)) != std::future_status::ready) {
    // `answer` is on this frame, and the callback may still come.
    ADD_FAILURE() << "ClaimAsync did not answer within a minute";
    std::abort();
  }
  auto [result, thread] = answered.get();
  return {std::move(result), thread == std::this_thread::get_id()};
}

TEST_F(RocksdbStoreTest, ReopeningKeepsInProgressAndCompletedRecords) {
  testing::ExpectReopeningKeepsInProgressAndCompletedRecords(
      [&] { return OpenStore(); });
}

TEST_F(RocksdbStoreTest, WritesWithSyncSurviveReopening) {
  {
    auto store = OpenStore(/*sync=*/true);
    ASSERT_NE(store, nullptr);
    auto claim = store->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
    ASSERT_TRUE(claim.has_value());
    ASSERT_EQ(store->Complete(TestId(1), claim->token, SomeResponse()), true);
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto replay = store->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
}

TEST_F(RocksdbStoreTest, CorruptedValuesAreDataLossNotMisses) {
  Token token;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 1; i <= 3; ++i) {
      auto claim =
          store->Claim(TestId(i), TestFingerprint(1), kT0, kTtl, kLock);
      ASSERT_TRUE(claim.has_value());
      if (i == 1) token = claim->token;
      ASSERT_EQ(store->Complete(TestId(i), claim->token, SomeResponse()), true);
    }
  }
  // Id 1: one flipped bit in the body (checksum mismatch). Id 2: truncated.
  // Id 3: not a record at all.
  WithRawDb([&](rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf) {
    std::string value;
    ASSERT_TRUE(
        db.Get(rocksdb::ReadOptions(), cf, TestId(1).view(), &value).ok());
    value[value.size() - 8] ^= 0x01;
    ASSERT_TRUE(
        db.Put(rocksdb::WriteOptions(), cf, TestId(1).view(), value).ok());
    ASSERT_TRUE(
        db.Get(rocksdb::ReadOptions(), cf, TestId(2).view(), &value).ok());
    value.resize(40);
    ASSERT_TRUE(
        db.Put(rocksdb::WriteOptions(), cf, TestId(2).view(), value).ok());
    ASSERT_TRUE(
        db.Put(rocksdb::WriteOptions(), cf, TestId(3).view(), "garbage").ok());
  });

  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  for (int i = 1; i <= 3; ++i) {
    SCOPED_TRACE(i);
    testing::ExpectDataLossOnEveryCall(*store, TestId(i), token, DbPath());
    // The asynchronous claim too, now that those reads left the value's
    // block in the block cache: read and refused on the caller's thread.
    AsyncClaim async = ClaimAsyncOn(*store, TestId(i), TestFingerprint(1), kT0);
    ASSERT_FALSE(async.result.has_value());
    EXPECT_EQ(async.result.error().code(), ErrorCode::kDataLoss);
    EXPECT_TRUE(async.inside_the_call);
    // RocksDB's Release decodes the value first (SQLite's is one DELETE on
    // the token column, which a damaged blob does not stop).
    auto release = store->Release(TestId(i), token);
    ASSERT_FALSE(release.has_value());
    EXPECT_EQ(release.error().code(), ErrorCode::kDataLoss);
  }
  // Stats decodes every value: the three live ones count as damaged.
  auto stats = store->Stats(kT0);
  ASSERT_TRUE(stats.has_value()) << stats.error().ToString();
  ASSERT_TRUE(stats->has_value());
  EXPECT_EQ((*stats)->damaged, 3u);
  EXPECT_EQ((*stats)->completed + (*stats)->in_progress, 0u);
  // Once expired, a record whose header still reads is deleted like any
  // other (record 1: the flipped bit is in the body, which neither the purge
  // nor the compaction filter checksums). Values without a readable header
  // are never taken for expired ones: they stay kDataLoss.
  clock_->Advance(kTtl * 2);
  auto purged = store->PurgeExpired(kT0 + kTtl * 2, 100);
  ASSERT_TRUE(purged.has_value()) << purged.error().ToString();
  EXPECT_EQ(*purged, 1u);
  ASSERT_TRUE(store->Compact().has_value());
  auto gone = store->Inspect(TestId(1), kT0);
  ASSERT_TRUE(gone.has_value()) << gone.error().ToString();
  EXPECT_FALSE(gone->has_value());
  for (int i = 2; i <= 3; ++i) {
    auto inspect = store->Inspect(TestId(i), kT0);
    ASSERT_FALSE(inspect.has_value());
    EXPECT_EQ(inspect.error().code(), ErrorCode::kDataLoss);
  }
  // What neither purge nor compaction removes, an operator revokes; the key
  // can then run again.
  for (int i = 2; i <= 3; ++i) {
    SCOPED_TRACE(i);
    auto revoked = store->Revoke(TestId(i));
    ASSERT_TRUE(revoked.has_value()) << revoked.error().ToString();
    EXPECT_TRUE(*revoked);
    auto claim =
        store->Claim(TestId(i), TestFingerprint(1), clock_->Now(), kTtl, kLock);
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    EXPECT_FALSE(claim->takeover);
  }
}

// Without sync, a claim that a record in memory blocks (a replay, a
// mismatch, a claim in progress) is answered inside ClaimAsync, from one
// read on the caller's thread; a claim that writes (a new id, an expired
// record) is still made on the store's thread.
TEST_F(RocksdbStoreTest, AClaimARecordInMemoryBlocksIsAnsweredInsideTheCall) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto first = store->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  ASSERT_EQ(store->Complete(TestId(1), first->token, SomeResponse()), true);
  auto held = store->Claim(TestId(2), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(held.has_value()) << held.error().ToString();
  const TimePoint later = kT0 + seconds(1);

  AsyncClaim replay =
      ClaimAsyncOn(*store, TestId(1), TestFingerprint(1), later);
  ASSERT_TRUE(replay.result.has_value()) << replay.result.error().ToString();
  EXPECT_TRUE(replay.inside_the_call);
  EXPECT_EQ(replay.result->outcome, ClaimOutcome::kCompleted);
  ASSERT_NE(replay.result->response, nullptr);
  EXPECT_EQ(*replay.result->response, SomeResponse());
  EXPECT_EQ(replay.result->expires_at, kT0 + kTtl);

  AsyncClaim mismatch =
      ClaimAsyncOn(*store, TestId(1), TestFingerprint(2), later);
  ASSERT_TRUE(mismatch.result.has_value());
  EXPECT_TRUE(mismatch.inside_the_call);
  EXPECT_EQ(mismatch.result->outcome, ClaimOutcome::kMismatch);

  AsyncClaim busy = ClaimAsyncOn(*store, TestId(2), TestFingerprint(1), later);
  ASSERT_TRUE(busy.result.has_value());
  EXPECT_TRUE(busy.inside_the_call);
  EXPECT_EQ(busy.result->outcome, ClaimOutcome::kInProgress);
  EXPECT_EQ(busy.result->locked_until, kT0 + kLock);

  // Writes: on the store's thread.
  AsyncClaim fresh = ClaimAsyncOn(*store, TestId(3), TestFingerprint(1), later);
  ASSERT_TRUE(fresh.result.has_value()) << fresh.result.error().ToString();
  EXPECT_FALSE(fresh.inside_the_call);
  EXPECT_EQ(fresh.result->outcome, ClaimOutcome::kAcquired);
  AsyncClaim takeover = ClaimAsyncOn(*store, TestId(2), TestFingerprint(1),
                                     kT0 + kLock + seconds(1));
  ASSERT_TRUE(takeover.result.has_value());
  EXPECT_FALSE(takeover.inside_the_call);
  EXPECT_EQ(takeover.result->outcome, ClaimOutcome::kAcquired);
  EXPECT_TRUE(takeover.result->takeover);
  AsyncClaim expired = ClaimAsyncOn(*store, TestId(1), TestFingerprint(1),
                                    kT0 + kTtl + seconds(1));
  ASSERT_TRUE(expired.result.has_value());
  EXPECT_FALSE(expired.inside_the_call);
  EXPECT_EQ(expired.result->outcome, ClaimOutcome::kAcquired);
  EXPECT_FALSE(expired.result->takeover);
}

// Ids that differ in their last byte only: one stripe (rocksdb_impl.h),
// so the store thread's batch holds it for all of them at once.
RecordId SameStripeId(int i) {
  RecordId id;
  id.bytes.fill(0);
  id.bytes[RecordId::kSize - 1] = static_cast<std::uint8_t>(i);
  return id;
}

// The store thread writes the calls of a batch together and answers them
// after (rocksdb_impl.h, "staged writes"): an answer never comes before
// its write is in the database, a claim and the completion after it see
// each other, and ids that share a stripe, or that one batch claims
// twice, are each written once.
TEST_F(RocksdbStoreTest, AnAsynchronousWriteIsInTheDatabaseBeforeItsAnswer) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  constexpr int kIds = 100;  // More than a batch stages at once (32).
  std::atomic<int> answered{0};
  std::atomic<int> acquired{0};
  std::atomic<int> unseen{0};  // Answered before the write was readable.
  std::vector<Token> tokens(2 * kIds);  // Written by the store thread only.
  auto claim = [&](const RecordId& id, int slot) {
    store->ClaimAsync(id, TestFingerprint(1), kT0, kTtl, kLock,
                      [&, id, slot](Result<ClaimResult> r) {
                        if (r && r->outcome == ClaimOutcome::kAcquired) {
                          acquired.fetch_add(1);
                          tokens[slot] = r->token;
                          // White-box: a callback may not call a store
                          // (store.h), but RocksDB's Inspect takes no lock.
                          auto record = store->Inspect(id, kT0);
                          if (!record || !record->has_value() ||
                              (*record)->token != r->token) {
                            unseen.fetch_add(1);
                          }
                        }
                        answered.fetch_add(1);
                      });
  };
  // Posted back to back so that they share batches: each id twice (the
  // second finds the first's claim in progress), half of them on one
  // stripe.
  for (int i = 0; i < kIds; ++i) {
    const RecordId id = i % 2 == 0 ? TestId(i) : SameStripeId(i);
    claim(id, i);
    claim(id, kIds + i);
  }
  ASSERT_TRUE(WaitFor([&] { return answered.load() == 2 * kIds; }));
  EXPECT_EQ(acquired.load(), kIds);
  EXPECT_EQ(unseen.load(), 0);

  std::atomic<int> completed{0};
  std::atomic<int> not_completed{0};
  for (int i = 0; i < kIds; ++i) {
    const RecordId id = i % 2 == 0 ? TestId(i) : SameStripeId(i);
    const Token token = tokens[i] == Token() ? tokens[kIds + i] : tokens[i];
    store->CompleteAsync(
        id, token, std::make_shared<const Response>(SomeResponse()),
        [&, id](Result<bool> r) {
          auto record = store->Inspect(id, kT0);
          const bool done = r && *r && record && record->has_value() &&
                            (*record)->state == RecordState::kCompleted;
          (done ? completed : not_completed).fetch_add(1);
        });
  }
  ASSERT_TRUE(WaitFor([&] { return completed + not_completed == kIds; }));
  EXPECT_EQ(completed.load(), kIds);
  // And they are on disk: a reopened store replays every one.
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < kIds; ++i) {
    const RecordId id = i % 2 == 0 ? TestId(i) : SameStripeId(i);
    auto replay = store->Claim(id, TestFingerprint(1), kT0, kTtl, kLock);
    ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
    EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted) << i;
  }
}

// Many threads claim a few ids through the store thread while other
// threads take stripes of their own (a purge takes many at once, renewals
// and claims one): every id is acquired exactly once, and nothing waits
// for ever (the store thread never waits for a stripe while its batch
// holds others).
TEST_F(RocksdbStoreTest, ConcurrentAsynchronousClaimsAcquireEachIdOnce) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 8;
  constexpr int kClaimsPerThread = 200;
  constexpr int kIds = 16;
  std::vector<std::atomic<int>> acquired(kIds);
  std::atomic<int> answered{0};
  std::atomic<int> failed{0};
  std::atomic<bool> stop{false};
  // Short-lived records on the same stripes, purged in batches: the purge
  // holds many stripes at once.
  std::thread others([&] {
    while (!stop.load()) {
      for (int j = 0; j < 40; ++j) {
        const RecordId id =
            j % 2 == 0 ? TestId(1000 + j) : SameStripeId(100 + j);
        (void)store->Claim(id, TestFingerprint(1), kT0, seconds(1), seconds(1));
      }
      (void)store->PurgeExpired(kT0 + seconds(2), 1000);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kClaimsPerThread; ++i) {
        const int k = (t + i) % kIds;
        const RecordId id = k % 2 == 0 ? TestId(k) : SameStripeId(k);
        store->ClaimAsync(id, TestFingerprint(1), kT0, kTtl, kLock,
                          [&, k](Result<ClaimResult> r) {
                            if (!r) {
                              failed.fetch_add(1);
                            } else if (r->outcome == ClaimOutcome::kAcquired) {
                              acquired[k].fetch_add(1);
                            }
                            answered.fetch_add(1);
                          });
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const bool all_answered =
      WaitFor([&] { return answered.load() == kThreads * kClaimsPerThread; });
  stop.store(true);
  others.join();
  ASSERT_TRUE(all_answered);
  EXPECT_EQ(failed.load(), 0);
  for (int k = 0; k < kIds; ++k) EXPECT_EQ(acquired[k].load(), 1) << k;
}

// The caller's thread never reads a table file: a record that is in one
// only (flushed at close, no block cache) is claimed on the store's thread,
// and still replays. With sync every claim is made inside the call.
TEST_F(RocksdbStoreTest, ARecordOnlyInATableFileIsReadOnTheStoresThread) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    auto claim = store->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    ASSERT_EQ(store->Complete(TestId(1), claim->token, SomeResponse()), true);
  }  // Closing flushes the memtable to a table file.
  {
    auto store = OpenStoreWith({.block_cache_mb = 0});
    ASSERT_NE(store, nullptr);
    AsyncClaim replay =
        ClaimAsyncOn(*store, TestId(1), TestFingerprint(1), kT0 + seconds(1));
    ASSERT_TRUE(replay.result.has_value()) << replay.result.error().ToString();
    EXPECT_FALSE(replay.inside_the_call);
    EXPECT_EQ(replay.result->outcome, ClaimOutcome::kCompleted);
    ASSERT_NE(replay.result->response, nullptr);
    EXPECT_EQ(*replay.result->response, SomeResponse());
  }
  auto store = OpenStore(/*sync=*/true);
  ASSERT_NE(store, nullptr);
  AsyncClaim fresh =
      ClaimAsyncOn(*store, TestId(2), TestFingerprint(1), kT0 + seconds(1));
  ASSERT_TRUE(fresh.result.has_value()) << fresh.result.error().ToString();
  EXPECT_TRUE(fresh.inside_the_call);
  EXPECT_EQ(fresh.result->outcome, ClaimOutcome::kAcquired);
}

// A store that receives no more writes never compacts, so its compaction
// filter never runs: OpenStore's sweeper deletes the expired records.
TEST_F(RocksdbStoreTest, OpenStoresSweeperDeletesExpiredRecordsWithNoWrites) {
  constexpr int kShortLived = 100;
  constexpr int kLongLived = 50;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < kShortLived + kLongLived; ++i) {
      const Duration ttl = i < kShortLived ? seconds(10) : hours(1);
      ASSERT_TRUE(
          store->Claim(TestId(i), TestFingerprint(1), kT0, ttl, seconds(5))
              .has_value());
    }
  }  // Flushed to a table file on close.
  {
    auto store = idem::OpenStore(
        "rocksdb:" + DbPath(),
        {.clock = clock_, .sweep_interval = std::chrono::milliseconds(10)});
    ASSERT_TRUE(store.has_value()) << store.error().ToString();
    Sweeper* sweeper = FindSweeper(**store);
    ASSERT_NE(sweeper, nullptr);
    clock_->Advance(seconds(10));
    // The sweeper's thread runs in real time.
    WaitFor([&] { return sweeper->stats().purged >= kShortLived; });
    EXPECT_EQ(sweeper->stats().purged, std::size_t{kShortLived});
  }
  EXPECT_EQ(CountKeys(), std::size_t{kLongLived});
}

TEST_F(RocksdbStoreTest, CompactionDropsExpiredRecords) {
  constexpr int kShortLived = 100;
  constexpr int kLongLived = 50;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < kShortLived + kLongLived; ++i) {
      const Duration ttl = i < kShortLived ? seconds(10) : hours(1);
      auto claim =
          store->Claim(TestId(i), TestFingerprint(1), kT0, ttl, seconds(5));
      ASSERT_TRUE(claim.has_value());
      if (i % 2 == 0) {
        ASSERT_EQ(store->Complete(TestId(i), claim->token, SomeResponse()),
                  true);
      }
    }
    // Nothing has expired by the store's clock yet: compaction keeps all.
    ASSERT_TRUE(store->Compact().has_value());
  }
  EXPECT_EQ(CountKeys(), std::size_t{kShortLived + kLongLived});
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    clock_->Advance(seconds(10));  // expires_at <= now: expired.
    ASSERT_TRUE(store->Compact().has_value());
    // The survivors are intact.
    auto live = store->Inspect(TestId(kShortLived), clock_->Now());
    ASSERT_TRUE(live.has_value());
    ASSERT_TRUE(live->has_value());
    EXPECT_EQ((*live)->state, RecordState::kCompleted);
  }
  EXPECT_EQ(CountKeys(), std::size_t{kLongLived});
}

TEST_F(RocksdbStoreTest, ReadsCheckExpiryBeforeCompaction) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto claim =
      store->Claim(TestId(1), TestFingerprint(1), kT0, seconds(10), seconds(5));
  ASSERT_TRUE(claim.has_value());
  ASSERT_EQ(store->Complete(TestId(1), claim->token, SomeResponse()), true);
  auto gone = store->Inspect(TestId(1), kT0 + seconds(10));
  ASSERT_TRUE(gone.has_value());
  EXPECT_FALSE(gone->has_value());
  auto again = store->Claim(TestId(1), TestFingerprint(2), kT0 + seconds(10),
                            kTtl, kLock);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, ClaimOutcome::kAcquired);
  EXPECT_FALSE(again->takeover);
}

TEST_F(RocksdbStoreTest, PurgeExpiredWorksInBatchesAndResumes) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  // Many 32-record batches, interleaved with live records.
  constexpr int kRecords = 1500;
  int expired = 0;
  for (int i = 0; i < kRecords; ++i) {
    const bool short_lived = i % 3 != 0;
    expired += short_lived;
    auto claim = store->Claim(TestId(i), TestFingerprint(1), kT0,
                              short_lived ? seconds(10) : hours(1), seconds(5));
    ASSERT_TRUE(claim.has_value());
  }
  const TimePoint later = kT0 + seconds(10);
  std::size_t total = 0;
  auto first = store->PurgeExpired(later, 300);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, 300u);
  total += *first;
  auto rest = store->PurgeExpired(later, 100000);
  ASSERT_TRUE(rest.has_value());
  total += *rest;
  EXPECT_EQ(total, static_cast<std::size_t>(expired));
  auto none = store->PurgeExpired(later, 100000);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(*none, 0u);
  for (int i = 0; i < kRecords; i += 7) {
    auto record = store->Inspect(TestId(i), kT0);
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->has_value(), i % 3 == 0) << i;
  }
}

// A call that stops early leaves its iterator, which reads the store as it
// was, to the next call (rocksdb_impl.h): records claimed again in between
// are live, and the next call must neither delete them nor miss the
// expired records after them.
TEST_F(RocksdbStoreTest,
       PurgeExpiredDeletesNothingClaimedAgainSinceItsLastCall) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  constexpr int kRecords = 1500;
  for (int i = 0; i < kRecords; ++i) {
    ASSERT_TRUE(
        store
            ->Claim(TestId(i), TestFingerprint(1), kT0, seconds(10), seconds(5))
            .has_value());
  }
  const TimePoint later = kT0 + seconds(10);
  auto first = store->PurgeExpired(later, 300);
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  ASSERT_EQ(*first, 300u);
  // Every odd record is claimed again (purged or not): live for an hour.
  for (int i = 1; i < kRecords; i += 2) {
    auto claim = store->Claim(TestId(i), TestFingerprint(2), later, hours(1),
                              seconds(5));
    ASSERT_TRUE(claim.has_value());
    ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  }
  auto rest = store->PurgeExpired(later, 100000);
  ASSERT_TRUE(rest.has_value()) << rest.error().ToString();
  EXPECT_GT(*rest, 0u);
  EXPECT_LE(*first + *rest, static_cast<std::size_t>(kRecords));
  auto stats = store->Stats(later);
  ASSERT_TRUE(stats.has_value());
  ASSERT_TRUE(stats->has_value());
  EXPECT_EQ((*stats)->expired, 0u);  // Nothing expired was missed.
  EXPECT_EQ((*stats)->in_progress, static_cast<std::uint64_t>(kRecords / 2));
  for (int i = 0; i < kRecords; ++i) {
    auto record = store->Inspect(TestId(i), later);
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->has_value(), i % 2 == 1) << i;
  }
}

// One call examines a bounded number of keys (rocksdb_store.h), so a sweep
// of a large store stays short; the next call goes on where it stopped.
TEST_F(RocksdbStoreTest, PurgeExpiredExaminesABoundedNumberOfKeysPerCall) {
  constexpr int kLive = 100'000;    // The budget of a call with limit 1000.
  ASSERT_NE(OpenStore(), nullptr);  // Creates the database.
  RecordId last;
  last.bytes.fill(0xff);  // Sorts after every other key.
  WithRawDb([&](rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf) {
    const std::string live = EncodeRecord(
        NewClaimRecord(TestFingerprint(1), kT0, hours(1), seconds(5)));
    rocksdb::WriteOptions write;
    write.disableWAL = true;  // Flushed on close.
    for (int i = 0; i < kLive; ++i) {
      ASSERT_TRUE(db.Put(write, cf, TestId(i).view(), live).ok());
    }
    const std::string expired = EncodeRecord(
        NewClaimRecord(TestFingerprint(1), kT0, seconds(1), seconds(1)));
    ASSERT_TRUE(db.Put(write, cf, last.view(), expired).ok());
    ASSERT_TRUE(db.Flush(rocksdb::FlushOptions(), cf).ok());
  });
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  const TimePoint later = kT0 + seconds(1);
  auto first = store->PurgeExpired(later, 1000);
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  EXPECT_EQ(*first, 0u);  // Stopped before the last key.
  auto second = store->PurgeExpired(later, 1000);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, 1u);
  auto gone = store->Inspect(last, kT0);
  ASSERT_TRUE(gone.has_value());
  EXPECT_FALSE(gone->has_value());
}

TEST_F(RocksdbStoreTest, OpeningAHeldDirectoryInThisProcessIsUnavailable) {
  auto first = OpenStore();
  ASSERT_NE(first, nullptr);
  auto second = RocksdbStore::Open({.path = DbPath()});
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(second.error().message(), HasSubstr(DbPath()));
  // Once the first is closed the directory opens again.
  first.reset();
  EXPECT_NE(OpenStore(), nullptr);
}

// Not a test on its own: the child process of the test below (run with
// --gtest_also_run_disabled_tests and kHoldEnv set).
TEST(RocksdbStoreHelper, DISABLED_HoldDirectoryUntilStdinCloses) {
  const char* dir = std::getenv(kHoldEnv);
  if (dir == nullptr) GTEST_SKIP() << kHoldEnv << " not set";
  auto store = RocksdbStore::Open({.path = dir});
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  std::cout << kHeldLine << std::endl;
  char c;
  while (::read(STDIN_FILENO, &c, 1) > 0) {
  }
}

std::string SelfPath() {
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

TEST_F(RocksdbStoreTest, OpeningADirectoryAnotherProcessHoldsIsUnavailable) {
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(from_child), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, to_child[1]);
  posix_spawn_file_actions_addclose(&actions, from_child[0]);
  std::string self = SelfPath();
  std::string filter =
      "--gtest_filter=RocksdbStoreHelper.DISABLED_"
      "HoldDirectoryUntilStdinCloses";
  std::string also = "--gtest_also_run_disabled_tests";
  std::vector<char*> argv = {self.data(), filter.data(), also.data(), nullptr};
  std::vector<std::string> env_strings = {std::string(kHoldEnv) + "=" +
                                          DbPath()};
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(),
                             envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(to_child[0]);
  ::close(from_child[1]);
  ASSERT_EQ(rc, 0);

  // Wait (bounded) for the child to report that it holds the directory.
  std::string out;
  bool child_closed = false;
  WaitFor([&] {
    pollfd p{from_child[0], POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) {
      char buf[512];
      const ssize_t n = ::read(from_child[0], buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<std::size_t>(n));
      } else {
        child_closed = true;  // It exited, or failed, before holding it.
      }
    }
    return child_closed || out.find(kHeldLine) != std::string::npos;
  });
  const bool held = out.find(kHeldLine) != std::string::npos;

  std::optional<Error> error;
  if (held) {
    auto store = RocksdbStore::Open({.path = DbPath()});
    if (!store) error = store.error();
  }
  ::close(to_child[1]);  // The child returns and exits.
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(from_child[0]);

  ASSERT_TRUE(held) << "child output:\n" << out;
  ASSERT_TRUE(error.has_value()) << "opened a directory another process holds";
  EXPECT_EQ(error->code(), ErrorCode::kUnavailable);
  EXPECT_THAT(error->message(), HasSubstr(DbPath()));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The child has exited: the directory is free again.
  EXPECT_NE(OpenStore(), nullptr);
}

TEST_F(RocksdbStoreTest, CreatesMissingParentDirectories) {
  const std::string nested = (dir_.path() / "a" / "b" / "db").string();
  auto store = RocksdbStore::Open({.path = nested});
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_TRUE(std::filesystem::is_directory(nested));
}

TEST_F(RocksdbStoreTest, APathThatIsAFileIsInvalid) {
  const std::string file = (dir_.path() / "file").string();
  std::ofstream(file) << "x";
  auto store = RocksdbStore::Open({.path = file});
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(store.error().message(), HasSubstr(file));
}

// Issue #8 §6: `rocksdb:/` opened a database in /, among the system's files.
TEST_F(RocksdbStoreTest, ADirectoryWithOtherFilesButNoDatabaseIsRefused) {
  const std::filesystem::path dir = DbPath();
  std::filesystem::create_directories(dir / "etc");
  std::ofstream(dir / "notes.txt") << "not a database";
  for (const bool via_uri : {false, true}) {
    SCOPED_TRACE(via_uri);
    std::optional<Error> error;
    if (via_uri) {
      auto store = ::idem::OpenStore("rocksdb:" + DbPath());
      if (!store) error = store.error();
    } else {
      auto store = RocksdbStore::Open({.path = DbPath()});
      if (!store) error = store.error();
    }
    ASSERT_TRUE(error.has_value());
    EXPECT_EQ(error->code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(error->message(), HasSubstr(DbPath()));
    EXPECT_THAT(error->message(), HasSubstr("no RocksDB database"));
  }
  // Nothing was written there.
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ::testing::ElementsAre("etc", "notes.txt"));
}

TEST_F(RocksdbStoreTest, EmptyAndExistingDirectoriesAreAccepted) {
  std::filesystem::create_directories(DbPath());
  {
    auto store = OpenStore();  // Empty.
    ASSERT_NE(store, nullptr);
  }
  // An existing database, with a file of the operator's beside it.
  std::ofstream(std::filesystem::path(DbPath()) / "README") << "idem records";
  EXPECT_NE(OpenStore(), nullptr);
  // Only what an interrupted first open leaves (no CURRENT yet).
  const std::filesystem::path fresh = dir_.path() / "fresh";
  std::filesystem::create_directories(fresh);
  std::ofstream(fresh / "LOCK");
  std::ofstream(fresh / "LOG");
  // A volume mounted for the database has its lost+found.
  std::filesystem::create_directories(fresh / "lost+found");
  auto store = RocksdbStore::Open({.path = fresh.string()});
  EXPECT_TRUE(store.has_value()) << store.error().ToString();
}

TEST_F(RocksdbStoreTest, EmptyPathIsInvalid) {
  auto store = RocksdbStore::Open({});
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
}

TEST_F(RocksdbStoreTest, OpensFromUri) {
  for (const std::string& uri :
       {"rocksdb:" + DbPath(), "rocksdb:" + DbPath() + "?sync=true",
        "rocksdb://" + DbPath() + "?sync=off"}) {
    testing::ExpectOpensFromUri(uri, "rocksdb", /*durable=*/true,
                                /*shared_across_processes=*/false);
  }
}

TEST_F(RocksdbStoreTest, OpensARelativePathFromUri) {
  testing::ExpectOpensInWorkingDirectory(dir_.path(), "rocksdb:./var/idem");
  EXPECT_TRUE(std::filesystem::is_directory(dir_.path() / "var" / "idem"));
}

TEST_F(RocksdbStoreTest, BadUrisAreInvalidArguments) {
  for (const std::string& uri :
       {std::string("rocksdb:"), "rocksdb:" + DbPath() + "?sync=maybe",
        "rocksdb:" + DbPath() + "?snyc=true", "rocksdb://host/" + DbPath(),
        std::string("rocksdb://user:secret@host:1/x")}) {
    testing::ExpectInvalidUri(uri, "rocksdb:");
  }
}

TEST_F(RocksdbStoreTest, OpensFromUriWithAnyBlockCacheSizeInRange) {
  for (const std::string size : {"0", "16", "1048576"}) {
    SCOPED_TRACE(size);
    auto store = idem::OpenStore("rocksdb:" + DbPath() +
                                 "?sync=false&block_cache_mb=" + size);
    ASSERT_TRUE(store.has_value()) << store.error().ToString();
    // A fresh id in each pass: the directory is the same.
    const RecordId id = TestId(std::stoull(size) + 1);
    auto claim = (*store)->Claim(id, TestFingerprint(1), kT0, kTtl, kLock);
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    ASSERT_EQ((*store)->Complete(id, claim->token, SomeResponse()), true);
    auto replay =
        (*store)->Claim(id, TestFingerprint(1), kT0 + seconds(1), kTtl, kLock);
    ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
    ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
    ASSERT_NE(replay->response, nullptr);
    EXPECT_EQ(*replay->response, SomeResponse());
  }
}

TEST_F(RocksdbStoreTest, BadBlockCacheSizesAreInvalidArgumentsNamingIt) {
  for (const std::string size : {"-1", "abc", "1048577", "", "16MB"}) {
    SCOPED_TRACE(size);
    auto store =
        idem::OpenStore("rocksdb:" + DbPath() + "?block_cache_mb=" + size);
    ASSERT_FALSE(store.has_value());
    EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(store.error().message(), HasSubstr("block_cache_mb"));
    EXPECT_THAT(store.error().message(), HasSubstr("rocksdb:"));
  }
  // Nothing was created for a URI that was turned down.
  EXPECT_FALSE(std::filesystem::exists(DbPath()));

  auto store = RocksdbStore::Open(
      {.path = DbPath(),
       .block_cache_mb = RocksdbStoreOptions::kMaxBlockCacheMb + 1});
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(store.error().message(), HasSubstr("block_cache_mb"));
  EXPECT_THAT(store.error().message(), HasSubstr(DbPath()));
}

// Blocks one replay (a Claim of a completed id) found in the block cache and
// read from a table file, as RocksDB's per-thread perf context counts them:
// the store reads on the calling thread.
struct BlockReads {
  std::uint64_t from_cache = 0;
  std::uint64_t from_file = 0;
};

BlockReads CountedReplay(RocksdbStore& store, const RecordId& id,
                         const Fingerprint& fp) {
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kEnableCount);
  rocksdb::get_perf_context()->Reset();
  auto replay = store.Claim(id, fp, kT0 + seconds(1), kTtl, kLock);
  const rocksdb::PerfContext& perf = *rocksdb::get_perf_context();
  const BlockReads reads{.from_cache = perf.block_cache_hit_count,
                         .from_file = perf.block_read_count};
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  if (replay) {
    EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  } else {
    ADD_FAILURE() << replay.error().ToString();
  }
  return reads;
}

TEST_F(RocksdbStoreTest, ASecondReplayIsServedFromTheBlockCacheUnlessItIsOff) {
  constexpr int kRecords = 20000;
  const RecordId replayed = TestId(kRecords / 2);
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < kRecords; ++i) {
      auto claim =
          store->Claim(TestId(i), TestFingerprint(i), kT0, kTtl, kLock);
      ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
      if (TestId(i) == replayed) {
        ASSERT_EQ(store->Complete(TestId(i), claim->token, SomeResponse()),
                  true);
      }
    }
  }  // Closing flushes the memtable: below, every read is of a table file.

  for (const std::size_t cache_mb :
       {RocksdbStoreOptions::kDefaultBlockCacheMb, std::size_t{16}}) {
    SCOPED_TRACE(cache_mb);
    auto store = OpenStoreWith({.block_cache_mb = cache_mb});
    ASSERT_NE(store, nullptr);
    const BlockReads first =
        CountedReplay(*store, replayed, TestFingerprint(kRecords / 2));
    EXPECT_GE(first.from_file, 1u);
    const BlockReads second =
        CountedReplay(*store, replayed, TestFingerprint(kRecords / 2));
    EXPECT_EQ(second.from_file, 0u);
    EXPECT_GE(second.from_cache, 1u);
  }

  // Without a cache every replay reads its data block again.
  auto store = OpenStoreWith({.block_cache_mb = 0});
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const BlockReads reads =
        CountedReplay(*store, replayed, TestFingerprint(kRecords / 2));
    EXPECT_GE(reads.from_file, 1u);
    EXPECT_EQ(reads.from_cache, 0u);
  }
}

TEST_F(RocksdbStoreTest, TheClientKeyNeverReachesTheFiles) {
  // In the write-ahead log while open, in a table file after closing.
  idem::testing::ExpectNoSecretInFilesOpenAndClosed(OpenStore(), clock_,
                                                    dir_.path());
}

// ---- A full filesystem (issue #8, §1)

// The store, its files at `path` on the test's tmpfs.
Result<std::unique_ptr<Store>> OpenRocksdbAt(const std::string& path) {
  return RocksdbStore::Open({.path = path});
}

// create=false (RocksdbStoreOptions::create, URI `create`): only an idem
// database that exists is opened; a missing or empty directory, or a
// RocksDB database without the record column family, is kUnavailable naming
// what is missing, and no file is written.
TEST_F(RocksdbStoreTest, CreateFalseOpensOnlyAnExistingIdemDatabase) {
  auto open = [&](const std::filesystem::path& path) {
    return RocksdbStore::Open({.path = path.string(), .create = false});
  };
  const auto missing = dir_.path() / "missing";
  auto none = open(missing);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(none.error().message(), HasSubstr("does not exist"));
  EXPECT_FALSE(std::filesystem::exists(missing));

  const auto empty = dir_.path() / "empty";
  std::filesystem::create_directories(empty);
  auto nothing = open(empty);
  ASSERT_FALSE(nothing.has_value());
  EXPECT_EQ(nothing.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(nothing.error().message(), HasSubstr("no CURRENT file"));
  EXPECT_TRUE(std::filesystem::is_empty(empty));

  // Another application's RocksDB: the default column family only.
  const auto foreign = dir_.path() / "foreign";
  rocksdb_internal::RocksdbCall([&] {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, foreign.string(), &raw).ok());
    ASSERT_TRUE(raw->Close().ok());
    delete raw;
  });
  const auto before = testing::DirectoryEntries(foreign);
  auto other = open(foreign);
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(other.error().message(),
              HasSubstr("without idem's column family 'idempotency'"));
  EXPECT_EQ(testing::DirectoryEntries(foreign), before);

  // A real store opens, from options and from a URI.
  {
    auto created = OpenStore();
    ASSERT_NE(created, nullptr);
    ASSERT_TRUE(created->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock)
                    .has_value());
  }
  {
    auto existing = open(DbPath());
    ASSERT_TRUE(existing.has_value()) << existing.error().ToString();
    auto again =
        (*existing)->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->outcome, ClaimOutcome::kInProgress);
  }
  auto from_uri = idem::OpenStore("rocksdb:" + DbPath() + "?create=false",
                                  {.sweep_interval = Duration::zero()});
  EXPECT_TRUE(from_uri.has_value()) << from_uri.error().ToString();
}

IDEM_FULL_DISK_TESTS(Rocksdb, "db", OpenRocksdbAt)

// The same workloads with every Claim and Complete made through the
// asynchronous calls: the store thread's staged batches (rocksdb_impl.h)
// on a full disk answer each call kUnavailable or true, and every true
// replays, also after closing on the full disk.
Result<std::unique_ptr<Store>> OpenRocksdbThroughAsyncCallsAt(
    const std::string& path) {
  auto store = RocksdbStore::Open({.path = path});
  if (!store) return tl::unexpected(store.error());
  return std::unique_ptr<Store>(std::make_unique<ForwardingStore>(
      testing::ThroughAsyncCalls(std::shared_ptr<Store>(std::move(*store)))));
}

IDEM_FULL_DISK_TESTS(RocksdbAsync, "db", OpenRocksdbThroughAsyncCallsAt)

}  // namespace

namespace testing {
// ThroughAsyncCalls comes from the contract kit's library, whose suite this
// binary does not run (the contract binary does): the linker may keep its
// TEST_P definitions all the same (it does under ThreadSanitizer).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StoreContractTest);
}  // namespace testing
}  // namespace idem
