// See workloads.h; what each workload does is in idem_bench.cc's header.

#include "workloads.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "alloc_counter.h"
#include "bench_util.h"
#include "idem/fingerprint.h"
#include "idem/internal/sha256.h"
#include "idem/open_store.h"
#include "idem/record_id.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/types.h"
#include "raw_ops.h"
#include "run_state.h"
#include "run_store.h"

namespace idem::bench {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::seconds;

constexpr std::size_t kReplayKeys = 1024;
constexpr std::size_t kZipfKeys = 10'000;
constexpr double kZipfExponent = 0.99;
// Key spaces of the workloads, apart from each other and from the unique
// keys (thread index << 40).
constexpr std::uint64_t kHotKey = 0xC0FFEE;
constexpr std::uint64_t kReplayBase = std::uint64_t{1} << 60;
constexpr std::uint64_t kZipfBase = std::uint64_t{2} << 60;
constexpr std::uint64_t kWarmUpBase = std::uint64_t{3} << 60;
// Server runs (PostgreSQL, Redis) are warmed up (WarmUp) on as many
// threads as the stores' default pools have connections, kWarmUpOps
// operations each.
constexpr int kServerPool = 8;
constexpr int kWarmUpOps = 20;
// The sharded-mutex baseline's size hint for the one hot key.
constexpr std::size_t kExpiringRecords = 16;

// A count as a share of the run's iterations (summed over its threads).
benchmark::Counter Share(std::int64_t n) {
  return benchmark::Counter(static_cast<double>(n),
                            benchmark::Counter::kAvgIterations);
}

// Claim outcomes of one thread, reported as the conflicts, acquired and
// replayed counters: the shares of claims that were InProgress, Acquired
// and Completed.
struct Outcomes {
  std::int64_t claims[4] = {};  // Indexed by ClaimOutcome.
  std::int64_t stale_completes = 0;

  void Report(benchmark::State& state) const {
    state.counters["conflicts"] =
        Share(claims[static_cast<int>(ClaimOutcome::kInProgress)]);
    state.counters["acquired"] =
        Share(claims[static_cast<int>(ClaimOutcome::kAcquired)]);
    state.counters["replayed"] =
        Share(claims[static_cast<int>(ClaimOutcome::kCompleted)]);
  }
};

// ---- Zipf ------------------------------------------------------------------

// P(rank <= k) for Zipf(kZipfExponent) over kZipfKeys ranks.
const std::vector<double>& ZipfCdf() {
  static const std::vector<double> cdf = [] {
    std::vector<double> c(kZipfKeys);
    double sum = 0;
    for (std::size_t k = 0; k < kZipfKeys; ++k) {
      sum += 1.0 / std::pow(static_cast<double>(k + 1), kZipfExponent);
      c[k] = sum;
    }
    for (double& v : c) v /= sum;
    return c;
  }();
  return cdf;
}

// A rank from a uniform 64-bit draw: binary search of the CDF.
std::size_t ZipfRank(std::uint64_t draw) {
  const double u = static_cast<double>(draw >> 11) * 0x1.0p-53;
  const auto& cdf = ZipfCdf();
  const auto it = std::lower_bound(cdf.begin(), cdf.end(), u);
  return std::min<std::size_t>(it - cdf.begin(), kZipfKeys - 1);
}

// ---- Store workloads -------------------------------------------------------

// Thread 0, before the loop: the records the workload expects to find.
Status Prepopulate(Store& store, Workload workload) {
  const Fingerprint fp = BenchFingerprint();
  const Response& response = BenchResponse();
  auto put = [&](std::uint64_t key, bool complete) -> Status {
    auto claim = store.Claim(IdFor(key), fp, kStart, hours(24), seconds(60));
    if (!claim) return tl::unexpected(claim.error());
    if (claim->outcome != ClaimOutcome::kAcquired) {
      return MakeError(ErrorCode::kInternal, "set-up claim not acquired");
    }
    if (!complete) return {};
    auto done = store.Complete(IdFor(key), claim->token, response);
    if (!done) return tl::unexpected(done.error());
    if (!*done) return MakeError(ErrorCode::kInternal, "set-up not completed");
    return {};
  };
  switch (workload) {
    case Workload::kReplay:
      for (std::uint64_t k = 0; k < kReplayKeys; ++k) {
        if (auto s = put(kReplayBase + k, true); !s) return s;
      }
      return {};
    case Workload::kHotKeyInProgress:
      return put(kHotKey, false);
    case Workload::kHotKeyCompleted:
      return put(kHotKey, true);
    default:
      return {};
  }
}

// Thread 0, before the loop, for a server's store only (PostgreSQL and
// Redis open their pools' connections lazily): every statement the workloads
// use (the claim's insert, the completion, the replay's read) run on as many
// concurrent callers as the loop will have, up to the pool's size, so that
// connecting and each session's first plans stay out of the timed loop, as
// the raw pool's connecting and preparing do. Its keys are its own range.
std::string WarmUpServer(Store& store, int threads) {
  const Fingerprint fp = BenchFingerprint();
  std::atomic<std::uint64_t> next{kWarmUpBase};
  return WarmUp(threads, kServerPool, kWarmUpOps, [&](int) {
    const RecordId id = IdFor(next.fetch_add(1));
    auto claim = store.Claim(id, fp, kStart, hours(24), seconds(60));
    if (!claim) return claim.error().ToString();
    auto done = store.Complete(id, claim->token, BenchResponse());
    if (!done) return done.error().ToString();
    auto replay = store.Claim(id, fp, kStart, hours(24), seconds(60));
    if (!replay) return replay.error().ToString();
    if (!*done || replay->outcome != ClaimOutcome::kCompleted) {
      return std::string("warm-up record did not complete and replay");
    }
    return std::string();
  });
}

// The records a run of `workload` may create, for the memory store's room.
std::size_t RecordsFor(const benchmark::State& state, Workload workload) {
  switch (workload) {
    case Workload::kClaim:
    case Workload::kClaimComplete:
      return static_cast<std::size_t>(state.max_iterations) * state.threads();
    case Workload::kReplay:
      return kReplayKeys;
    case Workload::kZipf:
      return kZipfKeys;
    default:
      return 1;
  }
}

}  // namespace

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kClaim:
      return "Claim";
    case Workload::kClaimComplete:
      return "ClaimComplete";
    case Workload::kReplay:
      return "Replay";
    case Workload::kHotKeyInProgress:
      return "HotKeyInProgress";
    case Workload::kHotKeyCompleted:
      return "HotKeyCompleted";
    case Workload::kZipf:
      return "Zipf";
  }
  return "?";
}

bool InMemory(const StoreSpec& spec) {
  if (spec.uri.empty()) return true;  // The ShardedMutexStore baseline.
  const StoreDescriptor* store = StoreOf(spec.uri);
  return store != nullptr && InMemoryStore(*store);
}

void BM_Store(benchmark::State& state, StoreSpec* spec, Workload workload) {
  if (Run* opened =
          OpenRun(state, *spec, RecordsFor(state, workload), /*raw=*/false)) {
    if (auto s = Prepopulate(*opened->store, workload); !s) {
      state.SkipWithError(("set-up: " + s.error().ToString()).c_str());
      CloseRun(state);
    } else if (IsServer(spec->uri)) {
      if (std::string e = WarmUpServer(*opened->store, state.threads());
          !e.empty()) {
        state.SkipWithError(("warm-up: " + e).c_str());
        CloseRun(state);
      }
    }
  }
  const Fingerprint fp = BenchFingerprint();
  // The Guard builds the response once per request and hands it over
  // shared (CompleteShared); the memory store keeps that very object.
  const auto response = std::make_shared<const Response>(BenchResponse());
  const std::uint64_t thread = static_cast<std::uint64_t>(state.thread_index());
  std::uint64_t next = 0;
  std::uint64_t rng = Mix(thread + 1) ^ (state.max_iterations << 8);
  Outcomes outcomes;
  Run* run = nullptr;
  const AllocationCounter allocations;

  for (auto _ : state) {
    if (run == nullptr && (run = CurrentRun(state)) == nullptr) break;
    std::uint64_t key;
    switch (workload) {
      case Workload::kClaim:
      case Workload::kClaimComplete:
        key = (thread << 40) + next++;
        break;
      case Workload::kReplay:
        key = kReplayBase + (thread * 97 + next++) % kReplayKeys;
        break;
      case Workload::kZipf:
        key = kZipfBase + ZipfRank(Mix(rng++));
        break;
      default:
        key = kHotKey;
    }
    const RecordId id = IdFor(key);
    auto claim = run->store->Claim(id, fp, kStart, hours(24), seconds(60));
    if (!claim) {
      state.SkipWithError(claim.error().ToString().c_str());
      break;
    }
    ++outcomes.claims[static_cast<int>(claim->outcome)];
    const char* unexpected = nullptr;
    switch (workload) {
      case Workload::kClaim:
      case Workload::kClaimComplete:
        if (claim->outcome != ClaimOutcome::kAcquired) {
          unexpected = "a new key was not acquired";
        }
        break;
      case Workload::kReplay:
      case Workload::kHotKeyCompleted:
        if (claim->outcome != ClaimOutcome::kCompleted) {
          unexpected = "a completed key did not replay";
        }
        break;
      case Workload::kHotKeyInProgress:
        if (claim->outcome != ClaimOutcome::kInProgress) {
          unexpected = "a held key was not in progress";
        }
        break;
      case Workload::kZipf:
        if (claim->outcome == ClaimOutcome::kMismatch) {
          unexpected = "mismatch on a single fingerprint";
        }
        break;
    }
    if (unexpected != nullptr) {
      state.SkipWithError(unexpected);
      break;
    }
    if (claim->outcome == ClaimOutcome::kCompleted) {
      benchmark::DoNotOptimize(claim->response->body.data());
    }
    const bool complete =
        claim->outcome == ClaimOutcome::kAcquired &&
        (workload == Workload::kClaimComplete || workload == Workload::kZipf);
    if (!complete) continue;
    auto done = run->store->CompleteShared(id, claim->token, response);
    if (!done || !*done) {
      state.SkipWithError(done ? "Complete returned false"
                               : done.error().ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  outcomes.Report(state);
  allocations.Report(state);
  CloseRun(state);
}

// ---- The hot key that keeps expiring ---------------------------------------

namespace {

// One claim on the hot key at `now`, and the completion if it acquired;
// returns an error message, or "" (no allocation).
std::string ExpiringStep(Store& store, const RecordId& id,
                         const Fingerprint& fp, TimePoint now,
                         const Response& response, Outcomes& outcomes) {
  const auto ttl = microseconds(100);
  auto claim = store.Claim(id, fp, now, ttl, ttl);
  if (!claim) return claim.error().ToString();
  ++outcomes.claims[static_cast<int>(claim->outcome)];
  switch (claim->outcome) {
    case ClaimOutcome::kAcquired: {
      auto done = store.Complete(id, claim->token, response);
      if (!done) return done.error().ToString();
      // False when a thread whose clock ran ahead found the record expired
      // and claimed it afresh in between.
      if (!*done) ++outcomes.stale_completes;
      return {};
    }
    case ClaimOutcome::kInProgress:
      return {};
    case ClaimOutcome::kCompleted:
      benchmark::DoNotOptimize(claim->response->body.data());
      return {};
    case ClaimOutcome::kMismatch:
      return "mismatch on a single fingerprint";
  }
  return "unknown outcome";
}

}  // namespace

void BM_HotKeyExpiring(benchmark::State& state, StoreSpec* spec) {
  OpenRun(state, *spec, kExpiringRecords, /*raw=*/false);
  const RecordId id = IdFor(kHotKey);
  const Fingerprint fp = BenchFingerprint();
  const Response& response = BenchResponse();
  // Each thread's clock moves 1 us per iteration; threads read slightly
  // different times, as threads reading a real clock do.
  TimePoint now = kStart;
  Outcomes outcomes;
  Run* run = nullptr;
  const AllocationCounter allocations;

  for (auto _ : state) {
    if (run == nullptr && (run = CurrentRun(state)) == nullptr) break;
    now += microseconds(1);
    const std::string error =
        ExpiringStep(*run->store, id, fp, now, response, outcomes);
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  outcomes.Report(state);
  state.counters["stale_complete"] = Share(outcomes.stale_completes);
  allocations.Report(state);
  CloseRun(state);
}

// ---- The raw engine write --------------------------------------------------

void BM_RawWrite(benchmark::State& state, StoreSpec* spec) {
  Run* opened = OpenRun(state, *spec, 0, /*raw=*/true);
  // As the store is warmed up (WarmUpServer): each of the pool's sessions
  // plans its prepared insert afresh for its first executions.
  if (opened != nullptr && IsServer(spec->uri)) {
    std::atomic<std::uint64_t> next{kWarmUpBase};
    std::string e =
        WarmUp(state.threads(), kServerPool, kWarmUpOps, [&](int t) {
          auto s = opened->raw->Write(IdFor(next.fetch_add(1)), t);
          return s ? std::string() : s.error().ToString();
        });
    if (!e.empty()) {
      state.SkipWithError(("warm-up: " + e).c_str());
      CloseRun(state);
    }
  }
  const std::uint64_t thread = static_cast<std::uint64_t>(state.thread_index());
  std::uint64_t next = 0;
  Run* run = nullptr;
  for (auto _ : state) {
    if (run == nullptr && (run = CurrentRun(state)) == nullptr) break;
    auto s =
        run->raw->Write(IdFor((thread << 40) + next++), state.thread_index());
    if (!s) {
      state.SkipWithError(s.error().ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  CloseRun(state);
}

// ---- Hashing ---------------------------------------------------------------

namespace {

std::string Bytes(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 26);
  return s;
}

}  // namespace

void BM_Hash(benchmark::State& state, Hash hash, std::size_t size) {
  const std::string bytes = Bytes(size);
  const FingerprintInput input{.method = "POST",
                               .target = "/orders?source=bench",
                               .headers = {},
                               .body = bytes,
                               .body_mode = BodyFingerprint::kRaw};
  for (auto _ : state) {
    switch (hash) {
      case Hash::kFingerprint:
        benchmark::DoNotOptimize(ComputeFingerprint(input));
        break;
      case Hash::kRecordId:
        benchmark::DoNotOptimize(MakeRecordId("tenant-42", bytes));
        break;
      case Hash::kSha256:
        benchmark::DoNotOptimize(Sha256(bytes));
        break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * size);
}

}  // namespace idem::bench
