// The PostgreSQL store beside the one statement it is built on (issue #5;
// results in docs/PERFORMANCE_NOTES.md).
//
//  - Postgres/Claim: PostgresStore::Claim of a fresh id (one round trip).
//  - Postgres/ClaimComplete: Claim of a fresh id, then Complete (two).
//  - Postgres/RawInsert: one prepared `INSERT ... ON CONFLICT (id) DO
//    NOTHING` of a fresh row into a table with the store's schema, the row a
//    claim writes, through a pool of as many connections as the store's
//    (raw_ops.h, shared with idem-bench).
// Targets: Claim <= 1.2x RawInsert, Claim+Complete <= 2.5x RawInsert.
//
// The server is the one named by IDEM_BENCH_POSTGRES_URI, else
// IDEM_TEST_POSTGRES_URI (scripts/postgres.sh start prints one); without
// either every run is skipped with that message. Every run gets fresh
// tables (dropped after the run), so runs never meet old rows. Both sides
// use `kPool` connections: with more threads than connections, threads
// queue for one, as requests of a server would.
//
// Before the timed loop, min(threads, kPool) threads run the run's own
// workload together until each has done kWarmUpOps operations. The store
// opens its connections lazily (one costs ~15 ms of a loaded server) and a
// new session plans a prepared statement afresh for its first 5 executions
// before it settles on the generic plan; the raw pool opens and prepares
// before the loop. Without the warm-up those one-time costs fell inside the
// store's timed loop only, a large share of a short 8-thread run.
//
// Times are wall-clock (UseRealTime); with N threads the reported time per
// iteration is the inverse of throughput across the threads.

#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "idem/open_store.h"
#include "idem/store.h"
#include "raw_ops.h"

namespace idem {
namespace {

using bench::IdFor;
using bench::kStart;
using std::chrono::hours;
using std::chrono::seconds;

constexpr int kPool = 8;
constexpr int kWarmUpOps = 20;

std::string ServerUri() {
  for (const char* name :
       {"IDEM_BENCH_POSTGRES_URI", "IDEM_TEST_POSTGRES_URI"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return v;
  }
  return {};
}

// The URI without its query: what libpq itself accepts.
std::string ConnInfo(const std::string& uri) {
  return uri.substr(0, uri.find('?'));
}

std::string WithParams(const std::string& uri, const std::string& params) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + params;
}

// Runs one statement on a fresh connection (set-up and tear-down).
bool Exec(const std::string& conninfo, const std::string& sql,
          std::string* error) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  bool ok = PQstatus(c) == CONNECTION_OK;
  if (ok) {
    PGresult* r = PQexec(c, sql.c_str());
    ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok && error != nullptr) *error = PQresultErrorMessage(r);
    PQclear(r);
  } else if (error != nullptr) {
    *error = PQerrorMessage(c);
  }
  PQfinish(c);
  return ok;
}

// ---- Per-run state: made by thread 0 before the timed loop, destroyed by
// it after; the loop's start and end are barriers across the run's threads.

struct Run {
  std::string conninfo;
  std::string table;
  std::unique_ptr<Store> store;
  std::unique_ptr<bench::RawOp> raw;
  std::atomic<std::uint64_t> next_key{0};
};
Run* g_run = nullptr;
int g_run_number = 0;

void StartRun(benchmark::State& state, bool raw) {
  if (state.thread_index() != 0) return;
  const std::string uri = ServerUri();
  if (uri.empty()) {
    state.SkipWithError(
        "no PostgreSQL: set IDEM_BENCH_POSTGRES_URI or IDEM_TEST_POSTGRES_URI "
        "(scripts/postgres.sh start prints one)");
    return;
  }
  auto run = std::make_unique<Run>();
  run->conninfo = ConnInfo(uri);
  run->table = "idem_bench_" + std::to_string(::getpid()) + "_" +
               std::to_string(++g_run_number);
  // Both create the table with the store's schema.
  const std::string run_uri =
      WithParams(uri, "table=" + run->table + "&pool=" + std::to_string(kPool));
  if (raw) {
    auto op = bench::OpenRawOp(run_uri, state.threads());
    if (!op) {
      state.SkipWithError(op.error().ToString().c_str());
      return;
    }
    run->raw = std::move(*op);
  } else {
    auto store = OpenStore(run_uri);
    if (!store) {
      state.SkipWithError(store.error().ToString().c_str());
      return;
    }
    run->store = std::move(*store);
  }
  g_run = run.release();
}

void TearDownRun(benchmark::State& state) {
  if (state.thread_index() != 0 || g_run == nullptr) return;
  std::unique_ptr<Run> run(g_run);
  g_run = nullptr;
  run->raw.reset();
  run->store.reset();
  Exec(run->conninfo,
       "DROP TABLE IF EXISTS \"" + run->table +
           "\"; DELETE FROM idem_schema_versions WHERE table_name = '" +
           run->table + "'",
       nullptr);
}

// The run's state, read inside the loop (only its start is a barrier after
// thread 0's set-up); null, and this thread's run skipped, when it failed.
Run* RunState(benchmark::State& state) {
  if (g_run == nullptr) state.SkipWithError("no store for this run");
  return g_run;
}

// ---- Workloads -------------------------------------------------------------

// One operation of a workload on a fresh id; an error message or empty.
std::string ClaimOnce(Run& run, bool complete) {
  static const Fingerprint fp = bench::BenchFingerprint();
  const RecordId id = IdFor(run.next_key.fetch_add(1));
  auto claim = run.store->Claim(id, fp, kStart, hours(24), seconds(60));
  if (!claim) return claim.error().ToString();
  if (claim->outcome != ClaimOutcome::kAcquired) return "claim did not acquire";
  if (!complete) return {};
  auto done = run.store->Complete(id, claim->token, bench::BenchResponse());
  if (!done) return done.error().ToString();
  if (!*done) return "complete returned false";
  return {};
}

std::string RawOnce(Run& run, int thread) {
  auto s = run.raw->Write(IdFor(run.next_key.fetch_add(1)), thread);
  return s ? std::string() : s.error().ToString();
}

void BM_Claim(benchmark::State& state, bool complete) {
  StartRun(state, /*raw=*/false);
  if (state.thread_index() == 0 && g_run != nullptr) {
    std::string e = bench::WarmUp(state.threads(), kPool, kWarmUpOps, [&](int) {
      return ClaimOnce(*g_run, complete);
    });
    if (!e.empty()) state.SkipWithError(("warm-up: " + e).c_str());
  }
  Run* run = nullptr;
  for (auto _ : state) {
    if (run == nullptr && (run = RunState(state)) == nullptr) break;
    if (std::string e = ClaimOnce(*run, complete); !e.empty()) {
      state.SkipWithError(e.c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  TearDownRun(state);
}

void BM_PostgresClaim(benchmark::State& state) { BM_Claim(state, false); }
void BM_PostgresClaimComplete(benchmark::State& state) {
  BM_Claim(state, true);
}

void BM_PostgresRawInsert(benchmark::State& state) {
  StartRun(state, /*raw=*/true);
  if (state.thread_index() == 0 && g_run != nullptr) {
    std::string e = bench::WarmUp(state.threads(), kPool, kWarmUpOps,
                                  [&](int t) { return RawOnce(*g_run, t); });
    if (!e.empty()) state.SkipWithError(("warm-up: " + e).c_str());
  }
  Run* run = nullptr;
  for (auto _ : state) {
    if (run == nullptr && (run = RunState(state)) == nullptr) break;
    if (std::string e = RawOnce(*run, state.thread_index()); !e.empty()) {
      state.SkipWithError(e.c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  TearDownRun(state);
}

void Threads(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  for (int t : {1, 2, 8, 32}) b->Threads(t);
}

BENCHMARK(BM_PostgresRawInsert)->Apply(Threads);
BENCHMARK(BM_PostgresClaim)->Apply(Threads);
BENCHMARK(BM_PostgresClaimComplete)->Apply(Threads);

}  // namespace
}  // namespace idem
