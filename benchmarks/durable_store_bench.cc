// The embedded durable stores beside the engine operation each is built on
// (docs/STORES.md has the results and the verdicts).
//
//  - Rocksdb/ClaimComplete: RocksdbStore::Claim of a fresh id, then Complete.
//    RawPut: one rocksdb::DB::Put of a fresh 32-byte key with a value the
//    size of the completed record, into a column family with the same
//    options. Arg 0: sync=false (the default), 1: sync=true.
//  - Sqlite/ClaimComplete: SqliteStore::Claim of a fresh id, then Complete.
//    RawInsert: one INSERT of a fresh row into a table with the store's
//    schema (primary key and expires_at index), autocommit, a value the size
//    of the completed record. Arg 0: synchronous=normal (the default),
//    1: synchronous=full.
// Targets (issue #4): Claim+Complete <= 3x a raw Put (RocksDB; it is a Get
// and two Puts) and <= 2.5x a raw INSERT (SQLite; two write transactions).
//
// Times are wall-clock (UseRealTime); with N threads the reported time per
// iteration is the inverse of throughput across the threads, and
// items_per_second is that throughput. Every run gets a fresh database in a
// fresh directory under $TMPDIR (or /tmp), removed after the run: put
// TMPDIR on the disk you want to measure.

#include <sqlite3.h>
#include <stdlib.h>

#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "idem/clock.h"
#include "idem/record.h"
#include "idem/record_codec.h"
#include "idem/response.h"
#include "idem/rocksdb_store.h"
#include "idem/sqlite_store.h"
#include "idem/store.h"
#include "idem/types.h"

namespace idem {
namespace {

using bench::BenchFingerprint;
using bench::BenchResponse;
using bench::IdFor;
using bench::kStart;
using std::chrono::hours;
using std::chrono::seconds;

// What the raw operations write: the bytes of a completed record.
const std::string& CompletedRecordBytes() {
  static const std::string bytes = [] {
    Record r;
    r.state = RecordState::kCompleted;
    r.fingerprint = BenchFingerprint();
    r.locked_until = kStart + seconds(60);
    r.expires_at = kStart + hours(24);
    r.response = std::make_shared<const Response>(BenchResponse());
    return EncodeRecord(r);
  }();
  return bytes;
}

// ---- Per-run state --------------------------------------------------------
// Made by thread 0 before the timed loop and destroyed by it after; the
// loop's start and end are barriers across the run's threads.

struct Run {
  std::filesystem::path dir;
  std::unique_ptr<Store> store;
  rocksdb::DB* raw_rocksdb = nullptr;
  rocksdb::ColumnFamilyHandle* raw_cf = nullptr;
  rocksdb::WriteOptions raw_write;
  std::string sqlite_path;
  bool sqlite_full = false;
  std::atomic<std::uint64_t> next_key{0};
};
Run* g_run = nullptr;

std::filesystem::path MakeTempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      (std::filesystem::path(tmp != nullptr && *tmp ? tmp : "/tmp") /
       "idem-durable-bench-XXXXXX")
          .string();
  if (::mkdtemp(pattern.data()) == nullptr) return {};
  return pattern;
}

// Raw SQLite connections: one per thread, like the store's pool.
std::vector<sqlite3*> g_sqlite_connections;
std::vector<sqlite3_stmt*> g_sqlite_inserts;

void TearDownRun(benchmark::State& state) {
  if (state.thread_index() != 0 || g_run == nullptr) return;
  g_run->store.reset();
  if (g_run->raw_rocksdb != nullptr) {
    g_run->raw_rocksdb->DestroyColumnFamilyHandle(g_run->raw_cf);
    g_run->raw_rocksdb->Close();
    delete g_run->raw_rocksdb;
  }
  for (sqlite3_stmt* s : g_sqlite_inserts) sqlite3_finalize(s);
  for (sqlite3* db : g_sqlite_connections) sqlite3_close(db);
  g_sqlite_inserts.clear();
  g_sqlite_connections.clear();
  std::error_code ec;
  std::filesystem::remove_all(g_run->dir, ec);
  delete g_run;
  g_run = nullptr;
}

bool StartRun(benchmark::State& state) {
  if (state.thread_index() != 0) return true;
  g_run = new Run();
  g_run->dir = MakeTempDir();
  if (g_run->dir.empty()) {
    state.SkipWithError("mkdtemp failed");
    return false;
  }
  return true;
}

// ---- Claim+Complete
// ----------------------------------------------------------

void ClaimCompleteLoop(benchmark::State& state) {
  Store* store = nullptr;
  const Fingerprint fp = BenchFingerprint();
  const Response& response = BenchResponse();
  for (auto _ : state) {
    // Read inside the loop: only its start is a barrier after thread 0's
    // set-up.
    if (store == nullptr) {
      store = g_run != nullptr ? g_run->store.get() : nullptr;
      if (store == nullptr) {
        state.SkipWithError("no store for this run");
        break;
      }
    }
    const RecordId id = IdFor(g_run->next_key.fetch_add(1));
    auto claim = store->Claim(id, fp, kStart, hours(24), seconds(60));
    if (!claim || claim->outcome != ClaimOutcome::kAcquired) {
      state.SkipWithError(claim ? "claim did not acquire"
                                : claim.error().ToString().c_str());
      break;
    }
    auto completed = store->Complete(id, claim->token, response);
    if (!completed || !*completed) {
      state.SkipWithError(completed ? "complete returned false"
                                    : completed.error().ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Rocksdb_ClaimComplete(benchmark::State& state) {
  if (StartRun(state) && state.thread_index() == 0) {
    StoreOptions options;
    auto store = RocksdbStore::Open(
        {.path = (g_run->dir / "db").string(), .sync = state.range(0) != 0},
        options);
    if (store) {
      g_run->store = std::move(*store);
    } else {
      state.SkipWithError(store.error().ToString().c_str());
    }
  }
  ClaimCompleteLoop(state);
  TearDownRun(state);
}

void BM_Sqlite_ClaimComplete(benchmark::State& state) {
  if (StartRun(state) && state.thread_index() == 0) {
    auto store = SqliteStore::Open(
        {.path = (g_run->dir / "idem.db").string(),
         .synchronous = state.range(0) != 0 ? SqliteSynchronous::kFull
                                            : SqliteSynchronous::kNormal,
         .busy_timeout = seconds(60)});
    if (store) {
      g_run->store = std::move(*store);
    } else {
      state.SkipWithError(store.error().ToString().c_str());
    }
  }
  ClaimCompleteLoop(state);
  TearDownRun(state);
}

// ---- Raw engine operations -----------------------------------------------

void BM_Rocksdb_RawPut(benchmark::State& state) {
  if (StartRun(state) && state.thread_index() == 0) {
    // The store's options: a second column family with a bloom filter.
    rocksdb::DBOptions db_options;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.max_background_jobs = 2;
    rocksdb::ColumnFamilyOptions cf_options;
    rocksdb::BlockBasedTableOptions table;
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    const rocksdb::Status s = rocksdb::DB::Open(
        db_options, (g_run->dir / "raw").string(),
        {{rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
         {"idempotency", cf_options}},
        &handles, &g_run->raw_rocksdb);
    if (s.ok()) {
      g_run->raw_rocksdb->DestroyColumnFamilyHandle(handles[0]);
      g_run->raw_cf = handles[1];
      g_run->raw_write.sync = state.range(0) != 0;
    } else {
      state.SkipWithError(s.ToString().c_str());
    }
  }
  const std::string& value = CompletedRecordBytes();
  for (auto _ : state) {
    if (g_run == nullptr || g_run->raw_rocksdb == nullptr) {
      state.SkipWithError("no database for this run");
      break;
    }
    const RecordId id = IdFor(g_run->next_key.fetch_add(1));
    const rocksdb::Status s =
        g_run->raw_rocksdb->Put(g_run->raw_write, g_run->raw_cf,
                                rocksdb::Slice(id.view().data(), 32), value);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  TearDownRun(state);
}

// One connection per thread, opened by thread 0 for all before the loop.
void BM_Sqlite_RawInsert(benchmark::State& state) {
  if (StartRun(state) && state.thread_index() == 0) {
    // The schema comes from the store itself, then the store is closed.
    const std::string path = (g_run->dir / "raw.db").string();
    auto store = SqliteStore::Open({.path = path});
    if (!store) {
      state.SkipWithError(store.error().ToString().c_str());
    } else {
      store->reset();
      const char* sync = state.range(0) != 0 ? "PRAGMA synchronous = FULL"
                                             : "PRAGMA synchronous = NORMAL";
      for (int t = 0; t < state.threads(); ++t) {
        sqlite3* db = nullptr;
        sqlite3_open_v2(path.c_str(), &db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
        sqlite3_busy_timeout(db, 60000);
        sqlite3_exec(db, sync, nullptr, nullptr, nullptr);
        sqlite3_stmt* insert = nullptr;
        sqlite3_prepare_v3(
            db,
            "INSERT INTO idem_records (id, state, fingerprint, token, "
            "locked_until, expires_at, record) VALUES (?1, 2, ?2, ?3, ?4, "
            "?5, ?6)",
            -1, SQLITE_PREPARE_PERSISTENT, &insert, nullptr);
        g_sqlite_connections.push_back(db);
        g_sqlite_inserts.push_back(insert);
      }
    }
  }
  const std::string& value = CompletedRecordBytes();
  const Fingerprint fp = BenchFingerprint();
  const Token token;
  sqlite3_stmt* insert = nullptr;
  for (auto _ : state) {
    if (insert == nullptr) {
      if (g_sqlite_inserts.size() <=
              static_cast<std::size_t>(state.thread_index()) ||
          g_sqlite_inserts[state.thread_index()] == nullptr) {
        state.SkipWithError("no connection for this run");
        break;
      }
      insert = g_sqlite_inserts[state.thread_index()];
    }
    const RecordId id = IdFor(g_run->next_key.fetch_add(1));
    sqlite3_bind_blob(insert, 1, id.bytes.data(), 32, SQLITE_STATIC);
    sqlite3_bind_blob(insert, 2, fp.bytes.data(), 32, SQLITE_STATIC);
    sqlite3_bind_blob(insert, 3, token.bytes.data(), 16, SQLITE_STATIC);
    sqlite3_bind_int64(insert, 4, 1);
    sqlite3_bind_int64(insert, 5, 2);
    sqlite3_bind_blob(insert, 6, value.data(), static_cast<int>(value.size()),
                      SQLITE_STATIC);
    const int rc = sqlite3_step(insert);
    sqlite3_reset(insert);
    if (rc != SQLITE_DONE) {
      state.SkipWithError(sqlite3_errstr(rc));
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  TearDownRun(state);
}

void DurableArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("fsync")->Arg(0)->Arg(1);
  b->Threads(1)->Threads(2)->Threads(8);
  b->UseRealTime();
}

BENCHMARK(BM_Rocksdb_ClaimComplete)->Apply(DurableArgs);
BENCHMARK(BM_Rocksdb_RawPut)->Apply(DurableArgs);
BENCHMARK(BM_Sqlite_ClaimComplete)->Apply(DurableArgs);
BENCHMARK(BM_Sqlite_RawInsert)->Apply(DurableArgs);

}  // namespace
}  // namespace idem
