// idem-bench: the same store workloads over every store URI given, beside
// each engine's raw write, the ShardedMutexStore baseline and the hashing
// costs of a request (issue #6). The one benchmark program: workloads.cc
// runs the workloads, registration.cc names them, this file reads the
// command line.
//
//   idem-bench [--idem_store_uris=URI,URI,...] [Google Benchmark flags]
//
// Default stores: every registered store (run_store.h, DefaultStoreUris):
// the embedded ones in <tmp> (a fresh directory under $TMPDIR or /tmp,
// removed at exit: memory:, rocksdb:<tmp>/rocksdb, sqlite:<tmp>/idem.db),
// and each server store whose variable is set ($IDEM_TEST_POSTGRES_URI,
// $IDEM_TEST_REDIS_URI, $IDEM_TEST_REDIS_CLUSTER_URI). A store that cannot be
// opened (bad URI, server down) has its rows skipped with the error
// (error_occurred / error_message in the JSON output); the run goes on, and
// after the first failure the store's later rows skip at once instead of
// waiting for the same timeout again.
//
// Names, for report generators: every row is
//   <Workload>/<label>[/iterations:<I>]/real_time/threads:<N>
// where <label> is the URI's scheme (memory, rocksdb, sqlite, postgresql,
// redis, redis-cluster),
// or <scheme>_<k> (k = 1, 2, ... in flag order) when several URIs share a
// scheme; the JSON context maps each label to its URI, password redacted, as
// "idem_store:<label>". Workloads, N in {1, 2, 4, 8, 32}:
//   Claim             Claim of a key never used before.
//   ClaimComplete     Claim of a new key, then Complete (CompleteShared).
//                     Also for label sharded_mutex: the ShardedMutexStore
//                     baseline (benchmarks/baseline), the bar the memory store
//                     must beat.
//   ClaimCompleteAsync
//                     ClaimComplete through ClaimAsync and CompleteAsync,
//                     32 in flight from one thread (N = 1 only), for the
//                     durable and server stores; skipped for a store whose
//                     Info().async_calls is false.
//   Replay            Claim of a completed key (1,024 keys prepopulated in
//                     set-up, outside the timing; threads cycle over them).
//   HotKeyInProgress  every thread claims one key held in progress: every
//                     claim is InProgress.
//   HotKeyCompleted   every thread claims one completed key: every claim is
//                     a replay.
//   Zipf              Zipf(0.99) over 10,000 keys (precomputed CDF, one RNG
//                     per thread): claim; if acquired, complete. The first
//                     claims of each key execute, the rest replay or meet a
//                     concurrent holder (conflicts).
//   ExtendLock        every thread renews its own claim (Store::ExtendLock)
//                     with a clock 1 us later each iteration: one write per
//                     renewal. Also for label sharded_mutex.
//   HotKeyExpiring    memory: and sharded_mutex only: every thread claims one
//                     key; Acquired completes it (Complete, a copy), the
//                     others see it InProgress or replay it. Each thread's
//                     clock moves 1 us per iteration over a 100 us ttl (=
//                     lock timeout), so the key keeps expiring and being
//                     acquired again; stale_complete is the share of
//                     completions that found the key claimed afresh.
//   RawWrite          the engine's own write (raw_ops.h) for the URIs of
//                     rocksdb, sqlite, postgresql and redis(-cluster): a
//                     RocksDB Put, an autocommit SQLite INSERT, an INSERT ..
//                     ON CONFLICT DO NOTHING through a pool of the store's
//                     size, a SET NX PX on the store's own pool.
// and the per-request hashing over 64B, 1KiB and 64KiB at 1 thread (1KiB
// at every N for Fingerprint and Sha256):
//   Fingerprint/<size>  ComputeFingerprint of a POST with that body.
//   RecordId/<size>     MakeRecordId of a key of that size (real keys are at
//                       most 255 bytes; the larger sizes show the slope).
//   Sha256/<size>       a bare SHA-256 of the same bytes (the floor).
// and GuardObservers/{none,noop} (guard_observers.cc, registered there):
// Guard::Begin + Finish with no observer and with one that does nothing.
//
// Counters: items_per_second (operations, i.e. iterations, per wall-clock
// second over all threads); on store workloads conflicts, acquired and
// replayed: the share of claims that were InProgress, Acquired and
// Completed (per iteration, all threads together), and allocs_per_op and
// alloc_bytes_per_op: operator new calls and bytes per iteration on the
// benchmark's threads (alloc_counter.h; a store's own threads uncounted).
//
// A store's options are its URI's, so the variants are URIs, selected
// with --benchmark_filter, e.g. the durable stores with a flush per commit
// beside their raw writes:
//   idem-bench --idem_store_uris='rocksdb:/d/a,rocksdb:/d/b?sync=true,
//     sqlite:/d/a.db,sqlite:/d/b.db?synchronous=full'
//     --benchmark_filter='^(ClaimComplete|RawWrite)/'
// (labels rocksdb_1, rocksdb_2, sqlite_1, sqlite_2); the memory store
// against its baseline: --idem_store_uris=memory:
// --benchmark_filter='^(ClaimComplete|HotKeyExpiring)/|1KiB'; PostgreSQL
// against its raw insert: --idem_store_uris=postgresql://...
// --benchmark_filter='^(Claim|ClaimComplete|RawWrite)/'; Redis likewise
// (--idem_store_uris=redis://...,redis-cluster://... or the variables).
//
// Every run (every thread count, and every trial run Google Benchmark makes
// to size a run) gets a fresh store (run_store.h). memory: gets a capacity
// of the run's records plus room (at most 2^25 = 33.5M records); a run that
// fills its store skips with the store's error. memory: and sharded_mutex
// insert a fixed 2^20 keys per Claim and ClaimComplete run (registration.cc
// says why); the other rows run for the minimum time. A PostgreSQL or Redis
// store, and its raw pool, are warmed up before timing (bench::WarmUp: the
// store's lazily opened connections and PostgreSQL sessions' first plans).
// Times are wall-clock (UseRealTime): with N threads the time per iteration is
// the inverse of the throughput. Keys are fixed ids (bench_util.h) claimed at
// the time the process started.

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <benchmark/benchmark.h>

#include "registration.h"
#include "run_store.h"
#include "workloads.h"

namespace idem::bench {
namespace {

std::filesystem::path MakeTempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      (std::filesystem::path(tmp != nullptr && *tmp ? tmp : "/tmp") /
       "idem-bench-XXXXXX")
          .string();
  if (::mkdtemp(pattern.data()) == nullptr) return {};
  return pattern;
}

int Main(int argc, char** argv) {
  // Our flag first, removed before Google Benchmark sees (and rejects) it.
  constexpr std::string_view kFlag = "--idem_store_uris=";
  std::optional<std::string> uri_list;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.substr(0, kFlag.size()) == kFlag) {
      uri_list = std::string(arg.substr(kFlag.size()));
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;

  std::filesystem::path temp_dir;
  std::vector<std::string> uris;
  if (uri_list) {
    uris = SplitUriList(*uri_list);
  } else {
    temp_dir = MakeTempDir();
    if (temp_dir.empty()) {
      std::perror("idem-bench: mkdtemp");
      return 1;
    }
    uris = DefaultStoreUris(temp_dir);
  }
  // The registered benchmarks point at the specs: they live until exit.
  static std::vector<StoreSpec> specs = MakeSpecs(uris);
  static StoreSpec sharded{"sharded_mutex", ""};
  RegisterAll(specs, sharded);

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (!temp_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir, ec);
  }
  return 0;
}

}  // namespace
}  // namespace idem::bench

int main(int argc, char** argv) { return idem::bench::Main(argc, argv); }
