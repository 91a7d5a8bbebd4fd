// The embedded durable stores beside the engine operation each is built on
// (docs/STORES.md has the results and the verdicts).
//
//  - Rocksdb/ClaimComplete: RocksdbStore::Claim of a fresh id, then Complete.
//    RawPut: one rocksdb::DB::Put of a fresh 32-byte key with a value the
//    size of the completed record, into a column family with the same
//    options (raw_ops.h, shared with idem-bench). Arg 0: sync=false (the
//    default), 1: sync=true.
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

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "idem/clock.h"
#include "idem/response.h"
#include "idem/rocksdb_store.h"
#include "idem/sqlite_store.h"
#include "idem/store.h"
#include "idem/types.h"
#include "raw_ops.h"

namespace idem {
namespace {

using bench::BenchFingerprint;
using bench::BenchResponse;
using bench::IdFor;
using bench::kStart;
using std::chrono::hours;
using std::chrono::seconds;

// ---- Per-run state --------------------------------------------------------
// Made by thread 0 before the timed loop and destroyed by it after; the
// loop's start and end are barriers across the run's threads.

struct Run {
  std::filesystem::path dir;
  std::unique_ptr<Store> store;
  std::unique_ptr<bench::RawOp> raw;
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

void TearDownRun(benchmark::State& state) {
  if (state.thread_index() != 0 || g_run == nullptr) return;
  g_run->store.reset();
  g_run->raw.reset();
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

// ---- Raw engine operations (raw_ops.h) ------------------------------------

// One raw write of a fresh id per iteration, into the engine that thread 0
// opens before the loop at `scheme` + <the run's directory>/`name` + `query`.
void RawWriteLoop(benchmark::State& state, const char* scheme, const char* name,
                  const char* query) {
  if (StartRun(state) && state.thread_index() == 0) {
    auto raw = bench::OpenRawOp(scheme + (g_run->dir / name).string() + query,
                                state.threads());
    if (raw) {
      g_run->raw = std::move(*raw);
    } else {
      state.SkipWithError(raw.error().ToString().c_str());
    }
  }
  bench::RawOp* raw = nullptr;
  for (auto _ : state) {
    if (raw == nullptr) {
      raw = g_run != nullptr ? g_run->raw.get() : nullptr;
      if (raw == nullptr) {
        state.SkipWithError("no database for this run");
        break;
      }
    }
    auto s =
        raw->Write(IdFor(g_run->next_key.fetch_add(1)), state.thread_index());
    if (!s) {
      state.SkipWithError(s.error().ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  TearDownRun(state);
}

void BM_Rocksdb_RawPut(benchmark::State& state) {
  RawWriteLoop(state, "rocksdb:", "raw",
               state.range(0) != 0 ? "?sync=true" : "?sync=false");
}

// One connection per thread, opened by thread 0 for all before the loop.
void BM_Sqlite_RawInsert(benchmark::State& state) {
  RawWriteLoop(
      state, "sqlite:", "raw.db",
      state.range(0) != 0 ? "?synchronous=full" : "?synchronous=normal");
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
