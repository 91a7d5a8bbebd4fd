// SQLite-store-only tests: what the contract suite cannot see from the Store
// interface. Records survive reopening; damaged rows are kDataLoss; the
// schema migrates from version 1; a held write lock is kUnavailable; four
// processes of eight threads claim the same ids and exactly one claim wins
// each, leaving a file that passes PRAGMA integrity_check; a failing write
// does not fail the writes committed with it; the WAL stays bounded;
// revoking damaged rows; a claim that loses every race answers kInProgress;
// OpenStore's sweeper; URI parameters; the client key never reaches the
// files.
//
// The tests look at the file through a raw sqlite3 connection of their own.
// Time is a ManualClock; the only waits (WaitFor) are for other processes.

#include <fcntl.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/durable_store.h"
#include "support/full_disk.h"
#include "support/ids.h"
#include "support/lost_races.h"
#include "support/renewal_writes.h"
#include "support/store_times.h"
#include "support/temp_dir.h"
#include "support/two_stores.h"
#include "support/wait_for.h"

#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/open_store.h"
#include "idem/sqlite_store.h"
#include "idem/store.h"
#include "idem/store/record_codec.h"
#include "idem/sweeper.h"
#include "sqlite_store_test_peer.h"
#include "support/secret_request.h"
#include "support/store_uri_checks.h"

extern char** environ;

namespace idem {
namespace {

using testing::SomeResponse;
using testing::TempDir;

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

using testing::kLock;
using testing::kT0;
using testing::kTtl;

RecordId Id(std::uint64_t n) { return testing::TestId(n); }
Fingerprint Fp(std::uint64_t n) { return testing::TestFingerprint(n); }

// A raw connection for looking at (and damaging) the file behind a store.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
      ADD_FAILURE() << "open " << path << ": " << sqlite3_errmsg(db_);
    }
    sqlite3_busy_timeout(db_, 60000);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  sqlite3* get() const { return db_; }

  void Exec(const std::string& sql) {
    char* error = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (error ? error : "");
    sqlite3_free(error);
  }

  // The first column of the first row, as text ("" when there is none).
  std::string QueryText(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr),
              SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
    std::string out;
    if (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
      const unsigned char* text = sqlite3_column_text(stmt, 0);
      if (text != nullptr) out = reinterpret_cast<const char*>(text);
    }
    sqlite3_finalize(stmt);
    return out;
  }

  // Runs `sql` with ?1 and ?2 bound to blobs.
  void ExecWithBlobs(const std::string& sql, std::string_view a,
                     std::string_view b = {}) {
    sqlite3_stmt* stmt = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr),
              SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
    sqlite3_bind_blob64(stmt, 1, a.data(), a.size(), SQLITE_TRANSIENT);
    if (sqlite3_bind_parameter_count(stmt) >= 2) {
      sqlite3_bind_blob64(stmt, 2, b.data(), b.size(), SQLITE_TRANSIENT);
    }
    EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE) << sqlite3_errmsg(db_);
    sqlite3_finalize(stmt);
  }

  std::string RecordBlob(const RecordId& id) {
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db_, "SELECT record FROM idem_records WHERE id = ?1", -1,
                       &stmt, nullptr);
    sqlite3_bind_blob(stmt, 1, id.bytes.data(), 32, SQLITE_TRANSIENT);
    std::string out;
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      out.assign(static_cast<const char*>(sqlite3_column_blob(stmt, 0)),
                 sqlite3_column_bytes(stmt, 0));
    }
    sqlite3_finalize(stmt);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

// Starts `threads` threads that each claim and complete `per_thread` fresh
// ids (Id(1) on, Id(n) claimed with Fp(n)), counting in failures[t] the ids
// thread t did not acquire and complete. The caller joins them.
std::vector<std::thread> ClaimAndCompleteFreshIds(Store& store, int threads,
                                                  int per_thread,
                                                  std::vector<int>& failures) {
  std::vector<std::thread> started;
  for (int t = 0; t < threads; ++t) {
    started.emplace_back([&store, &failures, t, per_thread] {
      for (int i = 0; i < per_thread; ++i) {
        const std::uint64_t n = 1 + t * per_thread + i;
        auto claim = store.Claim(Id(n), Fp(n), kT0, kTtl, kLock);
        if (!claim || claim->outcome != ClaimOutcome::kAcquired ||
            store.Complete(Id(n), claim->token, SomeResponse()) != true) {
          ++failures[t];
        }
      }
    });
  }
  return started;
}

class SqliteStoreTest : public ::testing::Test {
 protected:
  SqliteStoreTest() : clock_(std::make_shared<ManualClock>(kT0)) {}

  std::string DbPath() const { return (dir_.path() / "idem.db").string(); }

  std::unique_ptr<SqliteStore> OpenStore(SqliteStoreOptions options = {}) {
    options.path = DbPath();
    StoreOptions store_options;
    store_options.clock = clock_;
    auto store = SqliteStore::Open(options, store_options);
    EXPECT_TRUE(store.has_value()) << store.error().ToString();
    return store ? std::move(*store) : nullptr;
  }

  std::int64_t CountRows() {
    RawDb raw(DbPath());
    return std::stoll(raw.QueryText("SELECT count(*) FROM idem_records"));
  }

  TempDir dir_{"idem-sqlite"};
  std::shared_ptr<ManualClock> clock_;
};

TEST_F(SqliteStoreTest, ReopeningKeepsInProgressAndCompletedRecords) {
  testing::ExpectReopeningKeepsInProgressAndCompletedRecords(
      [&] { return OpenStore(); });
}

TEST_F(SqliteStoreTest, TheFileIsInWalModeWithTheCurrentSchemaVersion) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RawDb raw(DbPath());
  EXPECT_EQ(raw.QueryText("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.QueryText("PRAGMA user_version"),
            std::to_string(SqliteStore::kSchemaVersion));
  EXPECT_EQ(raw.QueryText("SELECT count(*) FROM sqlite_master WHERE name = "
                          "'idem_records_expires_at'"),
            "1");
}

TEST_F(SqliteStoreTest, DamagedRowsAreDataLossNotMisses) {
  Token token;
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    for (int i = 1; i <= 4; ++i) {
      auto claim = store->Claim(Id(i), Fp(1), kT0, kTtl, kLock);
      ASSERT_TRUE(claim.has_value());
      if (i == 1) token = claim->token;
      if (i != 4) {
        ASSERT_EQ(store->Complete(Id(i), claim->token, SomeResponse()), true);
      }
    }
  }
  {
    RawDb raw(DbPath());
    // 1: one flipped bit in the body (checksum mismatch).
    std::string blob = raw.RecordBlob(Id(1));
    ASSERT_FALSE(blob.empty());
    blob[blob.size() - 8] ^= 0x01;
    raw.ExecWithBlobs("UPDATE idem_records SET record = ?2 WHERE id = ?1",
                      Id(1).view(), blob);
    // 2: truncated.
    blob = raw.RecordBlob(Id(2));
    blob.resize(40);
    raw.ExecWithBlobs("UPDATE idem_records SET record = ?2 WHERE id = ?1",
                      Id(2).view(), blob);
    // 3: not a record at all.
    raw.ExecWithBlobs("UPDATE idem_records SET record = ?2 WHERE id = ?1",
                      Id(3).view(), "garbage");
    // 4: a valid record whose columns were changed behind its back.
    raw.ExecWithBlobs("UPDATE idem_records SET state = 2 WHERE id = ?1",
                      Id(4).view());
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  for (int i = 1; i <= 4; ++i) {
    SCOPED_TRACE(i);
    testing::ExpectDataLossOnEveryCall(*store, Id(i), token, DbPath());
  }
  // An operator revokes them: gone, and the key can run again.
  for (int i = 1; i <= 4; ++i) {
    SCOPED_TRACE(i);
    auto revoked = store->Revoke(Id(i));
    ASSERT_TRUE(revoked.has_value()) << revoked.error().ToString();
    EXPECT_TRUE(*revoked);
    auto claim = store->Claim(Id(i), Fp(1), kT0, kTtl, kLock);
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    EXPECT_FALSE(claim->takeover);
  }
}

// The claim's retry path, forced: each attempt's upsert meets a live
// record, which vanishes (another process revoked or released it) before
// the SELECT reads it, and is back before the next attempt's upsert.
TEST_F(SqliteStoreTest, AClaimThatLosesEveryRaceIsInProgressNotAnError) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RawDb raw(DbPath());
  testing::ExpectEveryLostRaceIsInProgress<SqliteStoreTestPeer>(
      *store,
      {.save =
           [&] {
             raw.Exec("CREATE TEMP TABLE saved AS SELECT * FROM idem_records");
           },
       .restore =
           [&] { raw.Exec("INSERT INTO idem_records SELECT * FROM saved"); },
       .delete_all = [&] { raw.Exec("DELETE FROM idem_records"); }});
}

// One lost race, then the key is free: the retry acquires.
TEST_F(SqliteStoreTest, AClaimWhoseObstacleVanishesOnceAcquiresOnRetry) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RawDb raw(DbPath());
  testing::ExpectOneLostRaceThenAcquires<SqliteStoreTestPeer>(
      *store, [&] { raw.Exec("DELETE FROM idem_records"); });
}

TEST_F(SqliteStoreTest, AFileThatIsNotADatabaseIsDataLoss) {
  std::ofstream(DbPath()) << std::string(8192, 'x');
  auto store = SqliteStore::Open({.path = DbPath()});
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kDataLoss);
  EXPECT_THAT(store.error().message(), HasSubstr(DbPath()));
}

// Writes a version-1 file: the record blob only, keyed by id.
void WriteV1File(const std::string& path,
                 const std::vector<std::pair<RecordId, std::string>>& rows) {
  RawDb raw(path);
  raw.Exec(
      "CREATE TABLE idempotency (id BLOB PRIMARY KEY, record BLOB NOT NULL)");
  raw.Exec("PRAGMA user_version = 1");
  for (const auto& [id, blob] : rows) {
    raw.ExecWithBlobs("INSERT INTO idempotency (id, record) VALUES (?1, ?2)",
                      id.view(), blob);
  }
}

// The records an old file holds for the migration tests: Id(1) in
// progress, Id(2) completed (expiring at kT0 + 10 s).
std::pair<Record, Record> MigratedRecords() {
  Record pending{.state = RecordState::kInProgress,
                 .fingerprint = Fp(1),
                 .token = testing::TestToken(1),
                 .locked_until = kT0 + kLock,
                 .expires_at = kT0 + kTtl};
  Record done{.state = RecordState::kCompleted,
              .fingerprint = Fp(2),
              .token = testing::TestToken(2),
              .locked_until = kT0 + kLock,
              .expires_at = kT0 + seconds(10)};
  done.response = std::make_shared<const Response>(SomeResponse());
  return {pending, done};
}

// What a migrated file must still do with the records of Id(1) (`pending`,
// in progress) and Id(2) (`done`, completed): read back as they were, and
// drive SQL by their migrated columns: the in-progress record blocks, its
// token completes it, the completed one replays.
void ExpectMigratedRecordsServe(Store& store, const Record& pending,
                                const Record& done) {
  auto got = store.Inspect(Id(1), kT0);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE(**got == pending);
  got = store.Inspect(Id(2), kT0);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  ASSERT_TRUE(got->has_value());
  EXPECT_TRUE(**got == done);
  auto busy = store.Claim(Id(1), Fp(1), kT0, kTtl, kLock);
  ASSERT_TRUE(busy.has_value()) << busy.error().ToString();
  EXPECT_EQ(busy->outcome, ClaimOutcome::kInProgress);
  EXPECT_EQ(store.Complete(Id(1), pending.token, SomeResponse()), true);
  auto replay = store.Claim(Id(2), Fp(2), kT0, kTtl, kLock);
  ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
}

TEST_F(SqliteStoreTest, MigratesAVersion1File) {
  const auto [pending, done] = MigratedRecords();
  WriteV1File(DbPath(), {{Id(1), EncodeRecord(pending)},
                         {Id(2), EncodeRecord(done)},
                         {Id(3), "not a record"}});

  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  {
    RawDb raw(DbPath());
    EXPECT_EQ(raw.QueryText("PRAGMA user_version"),
              std::to_string(SqliteStore::kSchemaVersion));
    EXPECT_EQ(raw.QueryText("SELECT count(*) FROM sqlite_master WHERE name = "
                            "'idempotency'"),
              "0");
    EXPECT_EQ(raw.QueryText("SELECT count(*) FROM idem_records"), "3");
  }
  ExpectMigratedRecordsServe(*store, pending, done);

  // The undecodable record came along: still kDataLoss, never purged.
  auto broken = store->Claim(Id(3), Fp(1), kT0, kTtl, kLock);
  ASSERT_FALSE(broken.has_value());
  EXPECT_EQ(broken.error().code(), ErrorCode::kDataLoss);
  auto purged = store->PurgeExpired(kT0 + hours(24 * 365), 100);
  ASSERT_TRUE(purged.has_value());
  EXPECT_EQ(*purged, 2u);
  auto inspect = store->Inspect(Id(3), kT0);
  ASSERT_FALSE(inspect.has_value());
  EXPECT_EQ(inspect.error().code(), ErrorCode::kDataLoss);
}

// A version-2 file: the same columns in a table WITHOUT ROWID keyed by id
// (the DDL version 2 created, kept here as the format such files have).
TEST_F(SqliteStoreTest, MigratesAVersion2FileKeepingEveryRow) {
  const auto [pending, done] = MigratedRecords();
  {
    RawDb raw(DbPath());
    raw.Exec(
        "CREATE TABLE idem_records (id BLOB PRIMARY KEY NOT NULL, "
        "state INTEGER NOT NULL, fingerprint BLOB NOT NULL, "
        "token BLOB NOT NULL, locked_until INTEGER NOT NULL, "
        "expires_at INTEGER NOT NULL, takeovers INTEGER NOT NULL DEFAULT 0, "
        "record BLOB NOT NULL) WITHOUT ROWID");
    raw.Exec(
        "CREATE INDEX idem_records_expires_at ON idem_records (expires_at)");
    raw.Exec("PRAGMA user_version = 2");
    auto hex = [](std::string_view bytes) {
      static constexpr char kDigits[] = "0123456789abcdef";
      std::string out = "x'";
      for (unsigned char c : bytes) {
        out += kDigits[c >> 4];
        out += kDigits[c & 0xF];
      }
      return out + "'";
    };
    for (const Record* record : {&pending, &done}) {
      raw.ExecWithBlobs(
          "INSERT INTO idem_records VALUES (?1, " +
              std::to_string(static_cast<int>(record->state)) + ", " +
              hex(record->fingerprint.view()) + ", " +
              hex(record->token.view()) + ", " +
              std::to_string(ToUnixNanos(record->locked_until)) + ", " +
              std::to_string(ToUnixNanos(record->expires_at)) + ", 0, ?2)",
          (record == &pending ? Id(1) : Id(2)).view(), EncodeRecord(*record));
    }
  }

  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  {
    RawDb raw(DbPath());
    EXPECT_EQ(raw.QueryText("PRAGMA user_version"),
              std::to_string(SqliteStore::kSchemaVersion));
    EXPECT_EQ(raw.QueryText("SELECT count(*) FROM sqlite_master WHERE name = "
                            "'idem_records_v2'"),
              "0");
    EXPECT_EQ(raw.QueryText("SELECT count(*) FROM sqlite_master WHERE name = "
                            "'idem_records_expires_at'"),
              "1");
    // Rows in insertion order now: the table has its rowid.
    EXPECT_EQ(raw.QueryText("SELECT count(seq) FROM idem_records"), "2");
  }
  ExpectMigratedRecordsServe(*store, pending, done);
  auto fresh = store->Claim(Id(3), Fp(3), kT0, kTtl, kLock);
  ASSERT_TRUE(fresh.has_value()) << fresh.error().ToString();
  EXPECT_EQ(fresh->outcome, ClaimOutcome::kAcquired);
  auto purged = store->PurgeExpired(kT0 + seconds(10), 100);
  ASSERT_TRUE(purged.has_value());
  EXPECT_EQ(*purged, 1u);
}

TEST_F(SqliteStoreTest, ANewerSchemaVersionIsRefused) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
  }
  const std::string newer = std::to_string(SqliteStore::kSchemaVersion + 1);
  RawDb(DbPath()).Exec("PRAGMA user_version = " + newer);
  auto store = SqliteStore::Open({.path = DbPath()});
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(store.error().message(), HasSubstr("schema version " + newer));
}

// A lock another connection gives up within busy_timeout is waited for.
TEST_F(SqliteStoreTest, AWriteLockReleasedWithinBusyTimeoutIsWaitedFor) {
  auto store = OpenStore({.busy_timeout = milliseconds(60000)});
  ASSERT_NE(store, nullptr);
  RawDb holder(DbPath());
  holder.Exec("BEGIN IMMEDIATE");
  std::atomic<bool> started{false};
  Result<ClaimResult> claim = tl::unexpected(Error(ErrorCode::kInternal, ""));
  std::thread waiter([&] {
    started = true;
    claim = store->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
  });
  for (int i = 0; i < 1'000'000 && !started; ++i) std::this_thread::yield();
  // Give the claim many chances to meet the lock before it goes.
  for (int i = 0; i < 10'000; ++i) std::this_thread::yield();
  holder.Exec("COMMIT");
  waiter.join();
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
}

TEST_F(SqliteStoreTest, AWriteLockHeldBeyondBusyTimeoutIsUnavailable) {
  auto store = OpenStore({.busy_timeout = milliseconds(50)});
  ASSERT_NE(store, nullptr);
  auto before = store->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
  ASSERT_TRUE(before.has_value());

  RawDb holder(DbPath());
  holder.Exec("BEGIN IMMEDIATE");
  auto claim = store->Claim(Id(2), Fp(1), kT0, kTtl, kLock);
  ASSERT_FALSE(claim.has_value());
  EXPECT_EQ(claim.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(claim.error().message(), HasSubstr(DbPath()));
  EXPECT_THAT(claim.error().message(), HasSubstr("busy_timeout=50 ms"));
  auto complete = store->Complete(Id(1), before->token, SomeResponse());
  ASSERT_FALSE(complete.has_value());
  EXPECT_EQ(complete.error().code(), ErrorCode::kUnavailable);
  // WAL readers do not wait for the writer.
  auto inspect = store->Inspect(Id(1), kT0);
  ASSERT_TRUE(inspect.has_value()) << inspect.error().ToString();
  EXPECT_TRUE(inspect->has_value());
  holder.Exec("ROLLBACK");

  // Nothing was half-written, and the store works again.
  auto inspect2 = store->Inspect(Id(2), kT0);
  ASSERT_TRUE(inspect2.has_value());
  EXPECT_FALSE(inspect2->has_value());
  auto again = store->Claim(Id(2), Fp(1), kT0, kTtl, kLock);
  ASSERT_TRUE(again.has_value()) << again.error().ToString();
  EXPECT_EQ(again->outcome, ClaimOutcome::kAcquired);
  EXPECT_EQ(store->Complete(Id(1), before->token, SomeResponse()), true);
}

TEST_F(SqliteStoreTest, TwoStoresOnOneFileSeeEachOther) {
  testing::TwoStores two;
  ASSERT_NO_FATAL_FAILURE(testing::OpenTwoAndClaim([&] { return OpenStore(); },
                                                   Id(1), Fp(1), &two));
  auto& [a, b, claim] = two;
  auto other = b->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->outcome, ClaimOutcome::kInProgress);
  ASSERT_EQ(a->Complete(Id(1), claim->token, SomeResponse()), true);
  auto replay = b->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_TRUE(b->Info().shared_across_processes);
}

TEST_F(SqliteStoreTest, AClaimOfAnotherStoreCanBeCompletedAndReleased) {
  testing::ExpectAClaimOfAnotherStoreCanBeCompletedAndReleased(
      [&] { return OpenStore(); });
}

TEST_F(SqliteStoreTest, ACompleteAfterARenewalElsewhereStaysReadable) {
  testing::ExpectACompleteAfterARenewalElsewhereStaysReadable(
      [&] { return OpenStore(); });
}

// More writers at once than one transaction takes (kMaxBatch, 64): each
// call runs, whoever writes the batch that holds it. (A caller that found
// the writer idle once ran only the first 64 queued calls, and returned
// "write not run" when its own was further back.)
TEST_F(SqliteStoreTest, MoreWritersAtOnceThanABatchTakesAllRun) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 256;
  constexpr int kPerThread = 8;
  std::atomic<bool> go{false};
  std::atomic<int> ready{0};
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ++ready;
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) {
        auto claim =
            store->Claim(Id(1 + t * kPerThread + i), Fp(1), kT0, kTtl, kLock);
        if (!claim || claim->outcome != ClaimOutcome::kAcquired) {
          ++failures[t];
        }
      }
    });
  }
  for (int i = 0; i < 100'000'000 && ready.load() < kThreads; ++i) {
    std::this_thread::yield();
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, std::vector<int>(kThreads, 0));
  EXPECT_EQ(CountRows(), kThreads * kPerThread);
}

// Writes from many threads share transactions (group commit): a call that
// fails (here Complete of a damaged row, kDataLoss) fails alone, and the
// calls committed beside it keep their results. The damaged row was
// claimed through another store, so that this one reads it to complete it
// (a claim it remembers needs no read).
TEST_F(SqliteStoreTest, AFailingWriteDoesNotFailTheWritesCommittedWithIt) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto damaged = OpenStore()->Claim(Id(0), Fp(0), kT0, kTtl, kLock);
  ASSERT_TRUE(damaged.has_value());
  {
    RawDb raw(DbPath());
    raw.ExecWithBlobs("UPDATE idem_records SET record = ?2 WHERE id = ?1",
                      Id(0).view(), "garbage");
  }
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  std::vector<int> failures(kThreads + 1, 0);
  std::vector<std::thread> threads =
      ClaimAndCompleteFreshIds(*store, kThreads, kPerThread, failures);
  threads.emplace_back([&] {
    for (int i = 0; i < kPerThread; ++i) {
      auto complete = store->Complete(Id(0), damaged->token, SomeResponse());
      if (complete.has_value() ||
          complete.error().code() != ErrorCode::kDataLoss) {
        ++failures[kThreads];
      }
    }
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, std::vector<int>(kThreads + 1, 0));
  for (std::uint64_t n = 1; n <= kThreads * kPerThread; ++n) {
    auto record = store->Inspect(Id(n), kT0);
    ASSERT_TRUE(record.has_value()) << n;
    ASSERT_TRUE(record->has_value()) << n;
    EXPECT_EQ((*record)->state, RecordState::kCompleted) << n;
  }
}

// The WAL is copied into the database file in the background, and inline
// when that falls behind, so it stays bounded (4000 frames of 4 KiB, plus
// one transaction's) however much is written; without checkpoints these
// writes would leave a WAL of ~70 MiB.
TEST_F(SqliteStoreTest, TheWalStaysBoundedUnderSustainedWrites) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 1500;
  std::vector<int> failures(kThreads, 0);
  for (auto& t :
       ClaimAndCompleteFreshIds(*store, kThreads, kPerThread, failures)) {
    t.join();
  }
  EXPECT_EQ(failures, std::vector<int>(kThreads, 0));
  const auto wal_size = std::filesystem::file_size(DbPath() + "-wal");
  EXPECT_LT(wal_size, 24u << 20);
  EXPECT_EQ(CountRows(), kThreads * kPerThread);
  RawDb raw(DbPath());
  EXPECT_EQ(raw.QueryText("PRAGMA integrity_check"), "ok");
}

TEST_F(SqliteStoreTest, PurgeExpiredDeletesInBatches) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  constexpr int kRecords = 2600;  // More than two 1000-row batches expire.
  int expired = 0;
  for (int i = 0; i < kRecords; ++i) {
    const bool short_lived = i % 5 != 0;
    expired += short_lived;
    ASSERT_TRUE(store
                    ->Claim(Id(i), Fp(1), kT0,
                            short_lived ? seconds(10) : hours(1), seconds(5))
                    .has_value());
  }
  const TimePoint later = kT0 + seconds(10);
  auto some = store->PurgeExpired(later, 1500);
  ASSERT_TRUE(some.has_value());
  EXPECT_EQ(*some, 1500u);
  auto rest = store->PurgeExpired(later, 100000);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(*rest, static_cast<std::size_t>(expired - 1500));
  EXPECT_EQ(CountRows(), kRecords - expired);
}

// OpenStore gives the store a sweeper (sweeper.h) on the store options'
// clock: a pass at the clock's time deletes the rows past their ttl and keeps
// the live ones. The pass runs on this thread (SweepOnce); the sweeper's own
// thread, an hour away, is sweeper_test's.
TEST_F(SqliteStoreTest, OpenStoresSweeperDeletesExpiredRows) {
  auto store = idem::OpenStore("sqlite:" + DbPath(),
                               {.clock = clock_, .sweep_interval = hours(1)});
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  ASSERT_NE(FindSweeper(**store), nullptr);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(
        (*store)
            ->Claim(Id(i), Fp(1), kT0, i < 15 ? seconds(10) : hours(1), kLock)
            .has_value());
  }
  auto early = FindSweeper(**store)->SweepOnce();
  ASSERT_TRUE(early.has_value()) << early.error().ToString();
  EXPECT_EQ(*early, 0u);
  clock_->Advance(seconds(10));
  auto swept = FindSweeper(**store)->SweepOnce();
  ASSERT_TRUE(swept.has_value()) << swept.error().ToString();
  EXPECT_EQ(*swept, 15u);
  EXPECT_EQ(CountRows(), 5);
  EXPECT_EQ(FindSweeper(**store)->stats().purged, 15u);
}

TEST_F(SqliteStoreTest, CreatesMissingParentDirectories) {
  const std::string nested = (dir_.path() / "a" / "b" / "idem.db").string();
  auto store = SqliteStore::Open({.path = nested});
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_TRUE(std::filesystem::is_regular_file(nested));
}

TEST_F(SqliteStoreTest, InvalidPathsAreInvalidArguments) {
  for (const std::string& path :
       {std::string(), std::string(":memory:"), dir_.path().string()}) {
    auto store = SqliteStore::Open({.path = path});
    ASSERT_FALSE(store.has_value()) << path;
    EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
  }
}

TEST_F(SqliteStoreTest, OpensFromUri) {
  for (const std::string& uri :
       {"sqlite:" + DbPath(), "sqlite://" + DbPath() + "?synchronous=full",
        "sqlite:" + DbPath() +
            "?synchronous=NORMAL&busy_timeout_ms=250&sweep_interval_s=0",
        "sqlite:" + DbPath() + "?synchronous=off&sweep_interval_s=60",
        "sqlite:" + DbPath() + "?synchronous=extra",
        "sqlite:" + DbPath() + "?cache_mb=0",
        "sqlite:" + DbPath() + "?cache_mb=256&synchronous=normal"}) {
    testing::ExpectOpensFromUri(uri, "sqlite", /*durable=*/true,
                                /*shared_across_processes=*/true);
  }
}

TEST_F(SqliteStoreTest, OpensARelativePathFromUri) {
  testing::ExpectOpensInWorkingDirectory(dir_.path(), "sqlite:./var/idem.db");
  EXPECT_TRUE(
      std::filesystem::is_regular_file(dir_.path() / "var" / "idem.db"));
}

TEST_F(SqliteStoreTest, BadUrisAreInvalidArguments) {
  for (const std::string& uri :
       {std::string("sqlite:"), "sqlite:" + DbPath() + "?synchronous=maybe",
        "sqlite:" + DbPath() + "?busy_timeout_ms=-1",
        "sqlite:" + DbPath() + "?busy_timeout_ms=99999999",
        "sqlite:" + DbPath() + "?sweep_interval_s=x",
        "sqlite:" + DbPath() + "?cache_mb=-1",
        "sqlite:" + DbPath() + "?cache_mb=lots",
        "sqlite:" + DbPath() + "?cache_mb=1048577",
        "sqlite:" + DbPath() + "?journal=delete", "sqlite://host/" + DbPath(),
        std::string("sqlite://user:secret@host:1/x")}) {
    testing::ExpectInvalidUri(uri, "sqlite:");
  }
}

TEST_F(SqliteStoreTest, CacheMbOutOfRangeNamesTheParameter) {
  auto uri = idem::OpenStore("sqlite:" + DbPath() + "?cache_mb=1048577");
  ASSERT_FALSE(uri.has_value());
  EXPECT_THAT(uri.error().message(), HasSubstr("cache_mb"));
  auto direct = SqliteStore::Open({.path = DbPath(), .cache_mb = 1u << 21});
  ASSERT_FALSE(direct.has_value());
  EXPECT_EQ(direct.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(direct.error().message(), HasSubstr("cache_mb"));
}

// Issue #8 §6: every duration has a maximum, checked where it enters. The
// typed options took a busy_timeout of 24 days and any sweep_interval (the
// sweeper's wait_for then overflows the clock).
TEST_F(SqliteStoreTest, DurationsHaveAMaximumNamedInTheError) {
  for (const std::string& param : {std::string("busy_timeout_ms=3600001"),
                                   std::string("sweep_interval_s=86401")}) {
    SCOPED_TRACE(param);
    auto uri = idem::OpenStore("sqlite:" + DbPath() + "?" + param);
    ASSERT_FALSE(uri.has_value());
    EXPECT_EQ(uri.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(uri.error().message(),
                HasSubstr("'" + param.substr(0, param.find('=')) + "'"));
    EXPECT_THAT(uri.error().message(), HasSubstr("must be a duration from"));
  }
  EXPECT_TRUE(idem::OpenStore("sqlite:" + DbPath() +
                              "?busy_timeout_ms=3600000&sweep_interval_s=86400")
                  .has_value());

  auto busy =
      SqliteStore::Open({.path = DbPath(),
                         .busy_timeout = SqliteStoreOptions::kMaxBusyTimeout +
                                         std::chrono::milliseconds(1)});
  ASSERT_FALSE(busy.has_value());
  EXPECT_EQ(busy.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(busy.error().message(), HasSubstr("busy_timeout"));
  // The sweeper is OpenStore's: its typed option is checked there.
  for (const idem::Duration sweep :
       {idem::Duration(idem::kMaxSweepInterval + std::chrono::seconds(1)),
        idem::Duration::max(), idem::Duration(std::chrono::seconds(-1))}) {
    auto store =
        idem::OpenStore("sqlite:" + DbPath(), {.sweep_interval = sweep});
    ASSERT_FALSE(store.has_value()) << sweep.count();
    EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(store.error().message(), HasSubstr("sweep_interval"));
  }
}

// How much SQLite holds in memory in this process (every connection's page
// cache included) after writing ~8 MiB of records through a store with
// `cache_mb`, less what it held before.
std::int64_t SqliteMemoryAfterWriting(SqliteStore& store, ManualClock& clock) {
  const std::int64_t before = sqlite3_memory_used();
  Response big = SomeResponse();
  big.body.assign(3000, 'x');
  for (std::uint64_t i = 0; i < 2800; ++i) {
    auto claim = store.Claim(Id(i), Fp(i), clock.Now(), kTtl, kLock);
    EXPECT_TRUE(claim.has_value());
    if (!claim) break;
    EXPECT_EQ(store.Complete(Id(i), claim->token, big), true);
  }
  return sqlite3_memory_used() - before;
}

TEST_F(SqliteStoreTest, CacheMbSizesTheWritersPageCache) {
  // The pages a write touched stay in the writer's cache up to cache_mb; a
  // small cache gives them back. Other connections (the checkpointer's,
  // readers') are the same in both runs.
  std::int64_t small = 0;
  {
    auto store = OpenStore({.cache_mb = 1});
    ASSERT_NE(store, nullptr);
    small = SqliteMemoryAfterWriting(*store, *clock_);
  }
  std::filesystem::remove_all(dir_.path());
  std::filesystem::create_directories(dir_.path());
  std::int64_t large = 0;
  {
    auto store = OpenStore({.cache_mb = 64});
    ASSERT_NE(store, nullptr);
    large = SqliteMemoryAfterWriting(*store, *clock_);
  }
  EXPECT_LT(small, std::int64_t{3} << 20) << "cache_mb=1: " << small << " B";
  EXPECT_GT(large, std::int64_t{6} << 20) << "cache_mb=64: " << large << " B";
}

TEST_F(SqliteStoreTest, TheClientKeyNeverReachesTheFiles) {
  // In the WAL while open, in the main file after the last connection
  // closes (and checkpoints).
  idem::testing::ExpectNoSecretInFilesOpenAndClosed(OpenStore(), clock_,
                                                    dir_.path());
}

// ---------------------------------------------------------------------------
// Several processes on one file. The test binary re-runs itself: the helper
// below is the child, selected with --gtest_filter and told what to do in
// environment variables.

constexpr char kChildFileEnv[] = "IDEM_SQLITE_TEST_FILE";
constexpr char kChildOutEnv[] = "IDEM_SQLITE_TEST_OUT";
constexpr char kChildGoEnv[] = "IDEM_SQLITE_TEST_GO";
constexpr int kProcesses = 4;
constexpr int kThreadsPerProcess = 8;
constexpr int kIds = 100;

// Writes one line per claim to the output file:
// "<id> <outcome> <token hex>" (errors as "<id> error <message>"), then
// "done". Waits for the go file first, so that every process's threads
// start claiming at about the same moment.
TEST(SqliteStoreHelper, DISABLED_ClaimTheSharedIds) {
  const char* file = std::getenv(kChildFileEnv);
  const char* out_path = std::getenv(kChildOutEnv);
  const char* go = std::getenv(kChildGoEnv);
  if (file == nullptr || out_path == nullptr || go == nullptr) {
    GTEST_SKIP() << "helper for SqliteStoreTest.FourProcesses...";
  }
  auto store = SqliteStore::Open(
      {.path = file, .busy_timeout = std::chrono::seconds(120)});
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  std::ofstream(std::string(out_path) + ".ready") << "ready";
  // A short poll, so that the processes start at about the same moment.
  ASSERT_TRUE(testing::WaitFor([&] { return std::filesystem::exists(go); },
                               testing::kDefaultWaitTimeout, milliseconds(1)))
      << "no go file";
  std::vector<std::string> lines(kThreadsPerProcess);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreadsPerProcess; ++t) {
    threads.emplace_back([&, t] {
      // Each thread walks the ids in its own order.
      std::vector<int> order(kIds);
      std::iota(order.begin(), order.end(), 0);
      std::mt19937 rng(static_cast<unsigned>(::getpid() * 31 + t));
      std::shuffle(order.begin(), order.end(), rng);
      std::ostringstream os;
      for (int i : order) {
        auto claim = (*store)->Claim(Id(i), Fp(1), kT0, kTtl, kLock);
        if (!claim) {
          os << i << " error " << claim.error().ToString() << "\n";
        } else {
          os << i << " " << ClaimOutcomeName(claim->outcome) << " "
             << claim->token.ToHex() << "\n";
        }
      }
      lines[t] = os.str();
    });
  }
  for (auto& thread : threads) thread.join();
  std::ofstream out(out_path);
  for (const std::string& l : lines) out << l;
  out << "done\n";
}

std::string SelfPath() {
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

// This binary again, running only the disabled helper `test` with `env`
// added to this process's environment; its stdout goes to /dev/null (its
// failures show in its exit status and in the files it writes).
pid_t SpawnHelper(const std::string& test, std::vector<std::string> env) {
  std::string self = SelfPath();
  std::string filter = "--gtest_filter=" + test;
  std::string also = "--gtest_also_run_disabled_tests";
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv = {self.data(), filter.data(), also.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv.data(),
                             envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// A new file is in rollback journal mode until the first store switches it
// to WAL. A connection that holds its write lock then (another process
// starting at the same moment, here a raw connection) makes SQLite answer
// the PRAGMA SQLITE_BUSY without calling the busy handler (waiting could
// deadlock): the store tries again until busy_timeout. Before, about one
// process in twenty of four starting together on a new file failed with
// "journal_mode: database is locked".
TEST_F(SqliteStoreTest, OpeningANewFileWaitsForAnotherConnectionsWriteLock) {
  const std::string file = (dir_.path() / "new.db").string();
  RawDb holder(file);
  holder.Exec("BEGIN IMMEDIATE");
  holder.Exec("CREATE TABLE other (x)");
  std::atomic<bool> finished{false};
  Result<std::unique_ptr<SqliteStore>> store =
      tl::unexpected(Error(ErrorCode::kInternal, "not opened"));
  std::thread opener([&] {
    store = SqliteStore::Open(
        {.path = file, .busy_timeout = std::chrono::seconds(60)});
    finished = true;
  });
  // Long enough for the open to meet the lock; an open that gives up at
  // once ends this early.
  for (int i = 0; i < 2'000'000 && !finished; ++i) std::this_thread::yield();
  holder.Exec("COMMIT");
  opener.join();
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_EQ(RawDb(file).QueryText("PRAGMA journal_mode"), "wal");
}

TEST_F(SqliteStoreTest, FourProcessesOfEightThreadsClaimEachIdOnce) {
  const std::string go = (dir_.path() / "go").string();
  std::vector<std::string> outs;
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcesses; ++p) {
    outs.push_back((dir_.path() / ("out" + std::to_string(p))).string());
    // The children's gtest chatter is of no interest unless they fail, and
    // then their output file says why.
    const pid_t pid =
        SpawnHelper("SqliteStoreHelper.DISABLED_ClaimTheSharedIds",
                    {std::string(kChildFileEnv) + "=" + DbPath(),
                     std::string(kChildOutEnv) + "=" + outs.back(),
                     std::string(kChildGoEnv) + "=" + go});
    ASSERT_GT(pid, 0);
    pids.push_back(pid);
  }
  // Start them together once all have opened the store.
  EXPECT_TRUE(testing::WaitFor([&] {
    return std::all_of(outs.begin(), outs.end(), [](const std::string& o) {
      return std::filesystem::exists(o + ".ready");
    });
  })) << "not every process opened the store";
  std::ofstream(go) << "go";
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "child exit status " << status;
  }

  std::map<int, int> acquired;
  std::map<int, std::string> winner_token;
  int lines = 0;
  for (const std::string& o : outs) {
    std::ifstream in(o);
    std::string line;
    bool done = false;
    while (std::getline(in, line)) {
      if (line == "done") {
        done = true;
        continue;
      }
      ++lines;
      std::istringstream fields(line);
      int id;
      std::string outcome, token;
      fields >> id >> outcome >> token;
      ASSERT_NE(outcome, "error") << line;
      if (outcome == "acquired") {
        ++acquired[id];
        winner_token[id] = token;
      } else {
        EXPECT_EQ(outcome, "in_progress") << line;
      }
    }
    EXPECT_TRUE(done) << o << " is incomplete";
  }
  EXPECT_EQ(lines, kProcesses * kThreadsPerProcess * kIds);
  for (int i = 0; i < kIds; ++i) {
    EXPECT_EQ(acquired[i], 1) << "id " << i;
  }

  RawDb raw(DbPath());
  EXPECT_EQ(raw.QueryText("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(raw.QueryText("SELECT count(*) FROM idem_records"),
            std::to_string(kIds));
  // The stored token of each id is the winner's.
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < kIds; ++i) {
    auto record = store->Inspect(Id(i), kT0);
    ASSERT_TRUE(record.has_value()) << record.error().ToString();
    ASSERT_TRUE(record->has_value());
    EXPECT_EQ((*record)->token.ToHex(), winner_token[i]) << "id " << i;
  }
}

// ---- A full filesystem (issue #8, §1)

// The store, its files at `path` on the test's tmpfs.
Result<std::unique_ptr<Store>> OpenSqliteAt(const std::string& path) {
  return SqliteStore::Open({.path = path});
}

// As for RocksDB.
IDEM_FULL_DISK_TESTS(Sqlite, "idem.db", OpenSqliteAt)

// One row write per renewal: a trigger on the file counts the rows every
// statement writes (the store's own connections included).
TEST_F(SqliteStoreTest, ARenewalWritesOneRow) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  RawDb raw(DbPath());
  testing::ExpectOneRowWrittenPerRenewal(
      *store, Id(1), Fp(1),
      [&] {
        raw.Exec("CREATE TABLE writes (n INTEGER NOT NULL)");
        raw.Exec("INSERT INTO writes VALUES (0)");
        for (const char* event : {"INSERT", "UPDATE", "DELETE"}) {
          raw.Exec(std::string("CREATE TRIGGER count_") + event + " AFTER " +
                   event +
                   " ON idem_records BEGIN UPDATE writes SET n = n + 1; END");
        }
      },
      [&] { return raw.QueryText("SELECT n FROM writes"); });
}

// create=false (SqliteStoreOptions::create, URI `create`): only an idem
// store that exists is opened; anything else is kUnavailable naming what is
// missing, and no byte of it changes (no table, no WAL switch, no parent
// directory, no -wal or -shm file).
TEST_F(SqliteStoreTest, CreateFalseOpensOnlyAnExistingIdemStore) {
  auto open = [&](const std::filesystem::path& path) {
    return idem::OpenStore("sqlite:" + path.string() + "?create=false",
                           {.sweep_interval = Duration::zero()});
  };
  const auto missing = dir_.path() / "no" / "such.db";
  auto none = open(missing);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(none.error().message(), HasSubstr("does not exist"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "no"));

  const auto empty = dir_.path() / "empty.db";
  std::ofstream(empty).close();
  const auto foreign = dir_.path() / "foreign.db";
  {
    RawDb raw(foreign.string());
    raw.Exec("CREATE TABLE orders (id INTEGER PRIMARY KEY)");
    raw.Exec("PRAGMA user_version = 7");
  }
  const auto v1 = dir_.path() / "v1.db";
  WriteV1File(v1.string(), {});
  const std::vector<std::string> entries =
      testing::DirectoryEntries(dir_.path());
  for (const auto& [path, says] :
       std::vector<std::pair<std::filesystem::path, std::string>>{
           {empty, "no table idem_records (user_version 0"},
           {foreign, "no table idem_records (user_version 7"},
           {v1, "schema version 1 that needs migrating to " +
                    std::to_string(SqliteStore::kSchemaVersion)}}) {
    SCOPED_TRACE(path.filename().string());
    const std::string before = testing::FileBytes(path);
    auto store = open(path);
    ASSERT_FALSE(store.has_value());
    EXPECT_EQ(store.error().code(), ErrorCode::kUnavailable);
    EXPECT_THAT(store.error().message(), HasSubstr(says));
    EXPECT_THAT(store.error().message(), HasSubstr("create=false"));
    EXPECT_EQ(testing::FileBytes(path), before);
    EXPECT_EQ(testing::DirectoryEntries(dir_.path()), entries);
  }

  // A real store opens and works.
  {
    auto created = OpenStore();
    ASSERT_NE(created, nullptr);
    auto claim = created->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
    ASSERT_TRUE(claim.has_value());
  }
  auto existing = open(DbPath());
  ASSERT_TRUE(existing.has_value()) << existing.error().ToString();
  auto again = (*existing)->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, ClaimOutcome::kInProgress);
  EXPECT_EQ(
      idem::OpenStore("sqlite:" + DbPath() + "?create=perhaps").error().code(),
      ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem
