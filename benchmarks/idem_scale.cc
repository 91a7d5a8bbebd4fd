// idem-scale: what the stores cost as they grow (issue #6, part 3). Each
// mode runs in its own process, because peak RSS (VmHWM) only ever grows.
//
//   idem-scale memory  [--records=1000000] [--body=200]
//       Peak RSS of the memory store holding `records` completed records,
//       each with its own response (status 201, no headers, a distinct
//       `body`-byte body): VmHWM after filling minus VmHWM before opening
//       the store, per record, against the payload (below).
//   idem-scale latency [--records=10000000] [--small=10000] [--probes=100000]
//       Memory store: Claim latency on a store holding `small` records and
//       on one holding `records`, both with a capacity for `records` (so
//       only the number held differs), plus a store sized for `small` only.
//   idem-scale disk    [--records=1000000] [--small=10000] [--probes=2000]
//                      [--body=200] [--dir=DIR] [--stores=rocksdb,sqlite]
//                      [--rocksdb=PARAMS] [--sqlite=PARAMS] [--settle_s=0]
//       RocksDB and SQLite (default options, sync=false / synchronous=
//       normal, unless PARAMS, a URI query such as `block_cache_mb=0` or
//       `cache_mb=0&synchronous=full`, says otherwise) under DIR (default: a
//       fresh directory under $TMPDIR or /tmp, removed after): Claim latency
//       with `small` records and with `records`, then the bytes on disk per
//       record after the store is closed (RocksDB flushes its memtable then)
//       and, for SQLite, a wal_checkpoint(TRUNCATE). `--stores` picks which
//       of the two run. `--settle_s` waits that long after each fill before
//       probing, so that the background work a bulk fill leaves behind
//       (RocksDB compactions, SQLite checkpoints) is not timed as the
//       claims' own cost.
//
// Payload of a record: what a store cannot do without, body + id (32) +
// fingerprint (32) + token (16) + locked_until and expires_at (8 + 8) =
// body + 96 bytes (296 B with a 200-byte body). Status, state and header
// bytes are not counted (the records have no headers).
//
// Latency probes: claim_new claims ids never used (the insert path; the
// probes stay in the store); claim_replay claims uniformly random completed
// ids (the read path, a fresh random id each time); claim_replay_small_set
// replays over a random `small`-id subset, revisited, so that the working
// set (and so the cache misses) is the same at every table size and only
// the table's size differs. Each probe is timed alone with steady_clock (its
// own cost, printed as clock_ns, is included); one thread, nothing else
// running in the process. Records are filled with Claim+Complete at one
// time (the process's start, by the real clock, so that RocksDB's
// compaction filter keeps them), so nothing expires, each with its own
// fingerprint (a shared one would compress away on disk).
//
// Output: one line per result, `key=value` pairs separated by spaces.

#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "idem/open_store.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/types.h"
#include "scale_probe.h"

namespace idem {
namespace {

using scale::Clock;
using scale::ClockCostNs;
using scale::Die;
using scale::Fill;
using scale::Open;
using scale::ProbeBoth;
using scale::ProcStatusBytes;

constexpr std::size_t kRecordOverhead = 32 + 32 + 16 + 8 + 8;
// Probe ids, apart from the filled ones (0, 1, 2, ...).
constexpr std::uint64_t kProbeBase = std::uint64_t{1} << 50;

// ---- Flags -----------------------------------------------------------------

struct Flags {
  std::string mode;
  std::size_t records = 0;
  std::size_t small = 10'000;
  std::size_t probes = 0;
  std::size_t body = 200;
  std::size_t settle_s = 0;
  std::string dir;
  std::string stores = "rocksdb,sqlite";
  std::string rocksdb_params;
  std::string sqlite_params;
};

bool ParseFlags(int argc, char** argv, Flags& flags) {
  if (argc < 2) return false;
  flags.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const std::size_t eq = arg.find('=');
    if (arg.substr(0, 2) != "--" || eq == std::string_view::npos) return false;
    const std::string_view name = arg.substr(2, eq - 2);
    const std::string value(arg.substr(eq + 1));
    if (name == "dir" || name == "stores" || name == "rocksdb" ||
        name == "sqlite") {
      (name == "dir"       ? flags.dir
       : name == "stores"  ? flags.stores
       : name == "rocksdb" ? flags.rocksdb_params
                           : flags.sqlite_params) = value;
      continue;
    }
    const std::size_t n = std::strtoull(value.c_str(), nullptr, 10);
    if (name == "records") {
      flags.records = n;
    } else if (name == "small") {
      flags.small = n;
    } else if (name == "probes") {
      flags.probes = n;
    } else if (name == "body") {
      flags.body = n;
    } else if (name == "settle_s") {
      flags.settle_s = n;
    } else {
      return false;
    }
  }
  return true;
}

// ---- Modes -----------------------------------------------------------------

int MemoryMode(const Flags& f) {
  const std::size_t n = f.records != 0 ? f.records : 1'000'000;
  const std::size_t hwm_before = ProcStatusBytes("VmHWM");
  const auto start = Clock::now();
  {
    // The default capacity rounds to the same 2^20 buckets; the store is
    // sized just for the records, as a deployment would size it.
    auto store =
        Open("memory:?max_bytes=1099511627776&capacity=" + std::to_string(n));
    Fill(*store, 0, n, f.body, 1);
    const std::size_t hwm = ProcStatusBytes("VmHWM");
    const std::size_t rss = ProcStatusBytes("VmRSS");
    const double per_record = static_cast<double>(hwm - hwm_before) / n;
    const std::size_t payload = f.body + kRecordOverhead;
    std::printf(
        "memory records=%zu body=%zu payload_per_record=%zu "
        "vmhwm_before=%zu vmhwm_after=%zu vmrss_after=%zu "
        "peak_bytes_per_record=%.1f ratio_to_payload=%.2f fill_s=%.1f\n",
        n, f.body, payload, hwm_before, hwm, rss, per_record,
        per_record / payload,
        std::chrono::duration<double>(Clock::now() - start).count());
  }
  return 0;
}

// Fills `store` to `small` records, then to 10x, 100x, ... and `n`,
// probing at each size; `body` as for Fill.
void FillAndProbe(Store& store, const std::string& name,
                  const std::string& config, std::size_t held, std::size_t n,
                  std::size_t small, std::size_t probes, std::size_t body,
                  std::uint64_t* next_new, std::size_t settle_s = 0) {
  for (std::size_t target = small;; target = std::min(n, target * 10)) {
    const auto start = Clock::now();
    Fill(store, held, target, body, 2);
    std::printf("fill store=%s records=%zu..%zu s=%.1f\n", name.c_str(), held,
                target,
                std::chrono::duration<double>(Clock::now() - start).count());
    held = target;
    std::this_thread::sleep_for(std::chrono::seconds(settle_s));
    ProbeBoth(store, name, config, held, small, probes, next_new);
    if (held == n) return;
  }
}

int LatencyMode(const Flags& f) {
  const std::size_t n = f.records != 0 ? f.records : 10'000'000;
  const std::size_t probes = f.probes != 0 ? f.probes : 100'000;
  std::printf("clock clock_ns=%.1f\n", ClockCostNs());
  std::uint64_t next_new = kProbeBase;
  {
    // Sized for the small table only: index and records fit in cache.
    auto store = Open("memory:?max_bytes=1099511627776&capacity=" +
                      std::to_string(f.small + 2 * probes + 1024));
    Fill(*store, 0, f.small, 0, 1);
    ProbeBoth(*store, "memory", "capacity_small", f.small, f.small, probes,
              &next_new);
  }
  // Room for the big table; the same store grows from the small one.
  auto store = Open("memory:?max_bytes=1099511627776&capacity=" +
                    std::to_string(n + 12 * probes + 1024));
  FillAndProbe(*store, "memory", "capacity_big", 0, n, f.small, probes, 0,
               &next_new);
  std::printf("vmhwm=%zu\n", ProcStatusBytes("VmHWM"));
  return 0;
}

std::size_t TreeBytes(const std::filesystem::path& dir, std::string_view ext) {
  std::size_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    if (!ext.empty() && e.path().extension() != ext) continue;
    total += e.file_size();
  }
  return total;
}

std::size_t FileBytes(const std::filesystem::path& p) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(p, ec);
  return ec ? 0 : size;
}

int DiskMode(const Flags& f) {
  const std::size_t n = f.records != 0 ? f.records : 1'000'000;
  const std::size_t probes = f.probes != 0 ? f.probes : 2'000;
  const std::size_t payload = f.body + kRecordOverhead;
  std::filesystem::path dir = f.dir;
  const bool temporary = dir.empty();
  if (temporary) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        (std::filesystem::path(tmp != nullptr && *tmp ? tmp : "/tmp") /
         "idem-scale-XXXXXX")
            .string();
    if (::mkdtemp(pattern.data()) == nullptr) Die("mkdtemp failed");
    dir = pattern;
  }
  std::printf("clock clock_ns=%.1f dir=%s\n", ClockCostNs(), dir.c_str());
  for (const std::string name : {"rocksdb", "sqlite"}) {
    if (("," + f.stores + ",").find("," + name + ",") == std::string::npos) {
      continue;
    }
    const std::filesystem::path path =
        dir / (name == "rocksdb" ? "rocksdb" : "idem.db");
    const std::string& params =
        name == "rocksdb" ? f.rocksdb_params : f.sqlite_params;
    std::uint64_t next_new = kProbeBase;
    {
      auto store = Open(name + ":" + path.string() +
                        (params.empty() ? "" : "?" + params));
      FillAndProbe(*store, name, params.empty() ? "default" : params, 0, n,
                   f.small, probes, f.body, &next_new, f.settle_s);
    }  // Closed: RocksDB flushes its memtable to a table file.
    // Replays add nothing; the new-id probes stay (in progress, no body).
    const std::size_t records = n + (next_new - kProbeBase);
    if (name == "rocksdb") {
      const std::size_t sst = TreeBytes(path, ".sst");
      const std::size_t all = TreeBytes(path, "");
      std::printf(
          "disk store=rocksdb records=%zu payload_per_record=%zu "
          "sst_bytes=%zu dir_bytes=%zu sst_bytes_per_record=%.1f "
          "dir_bytes_per_record=%.1f sst_ratio_to_payload=%.2f\n",
          records, payload, sst, all, static_cast<double>(sst) / records,
          static_cast<double>(all) / records,
          static_cast<double>(sst) / records / payload);
    } else {
      sqlite3* db = nullptr;
      if (sqlite3_open(path.c_str(), &db) != SQLITE_OK ||
          sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr,
                       nullptr) != SQLITE_OK) {
        Die(std::string("checkpoint: ") + sqlite3_errmsg(db));
      }
      sqlite3_close(db);
      const std::size_t main = FileBytes(path);
      const std::size_t wal = FileBytes(path.string() + "-wal");
      std::printf(
          "disk store=sqlite records=%zu payload_per_record=%zu "
          "db_bytes=%zu wal_bytes=%zu bytes_per_record=%.1f "
          "ratio_to_payload=%.2f\n",
          records, payload, main, wal,
          static_cast<double>(main + wal) / records,
          static_cast<double>(main + wal) / records / payload);
    }
    std::fflush(stdout);
  }
  if (temporary) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return 0;
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) {
    std::fprintf(stderr,
                 "usage: idem-scale memory|latency|disk [--records=N] "
                 "[--small=N] [--probes=N] [--body=BYTES] [--dir=DIR] "
                 "[--stores=rocksdb,sqlite] [--rocksdb=PARAMS] "
                 "[--sqlite=PARAMS] [--settle_s=N]\n");
    return 2;
  }
  if (flags.mode == "memory") return MemoryMode(flags);
  if (flags.mode == "latency") return LatencyMode(flags);
  if (flags.mode == "disk") return DiskMode(flags);
  std::fprintf(stderr, "idem-scale: unknown mode '%s'\n", flags.mode.c_str());
  return 2;
}

}  // namespace
}  // namespace idem

int main(int argc, char** argv) { return idem::Main(argc, argv); }
