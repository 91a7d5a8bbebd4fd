// See registration.h; the names and thread counts are idem_bench.cc's.

#include "registration.h"

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "guard_renewal.h"
#include "idem/open_store.h"
#include "raw_ops.h"
#include "run_store.h"
#include "workloads.h"

namespace idem::bench {
namespace {

constexpr int kThreadCounts[] = {1, 2, 4, 8, 32};

void ThreadCounts(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  for (int t : kThreadCounts) b->Threads(t);
}

// Claims of new keys grow the store by a record per iteration, and a bigger
// table is a slower one (more cache and TLB misses, more fresh memory). With
// a minimum time a faster store runs more iterations, so it would be
// measured on a bigger table than its baseline (the memory store ran 2.9 M
// claims in a 0.4 s run where the sharded-mutex map ran 2.0 M). The
// in-memory stores (memory: and the sharded-mutex baseline) therefore insert
// a fixed total of keys per run on those workloads, split over the threads;
// the durable stores keep the minimum time (a million writes would take
// them minutes).
constexpr benchmark::IterationCount kInMemoryKeysPerRun = 1 << 20;

void RegisterStoreRuns(const std::string& name, StoreSpec& spec, Workload w) {
  const bool fixed = InMemory(spec) &&
                     (w == Workload::kClaim || w == Workload::kClaimComplete);
  if (!fixed) {
    benchmark::RegisterBenchmark(name.c_str(), BM_Store, &spec, w)
        ->Apply(ThreadCounts);
    return;
  }
  for (int t : kThreadCounts) {
    benchmark::RegisterBenchmark(name.c_str(), BM_Store, &spec, w)
        ->UseRealTime()
        ->Threads(t)
        ->Iterations(kInMemoryKeysPerRun / t);
  }
}

void RegisterHashing() {
  const std::pair<const char*, Hash> hashes[] = {
      {"Fingerprint", Hash::kFingerprint},
      {"RecordId", Hash::kRecordId},
      {"Sha256", Hash::kSha256}};
  const std::pair<const char*, std::size_t> sizes[] = {
      {"64B", 64}, {"1KiB", 1024}, {"64KiB", 64 * 1024}};
  for (const auto& [size_name, size] : sizes) {
    for (const auto& [hash_name, hash] : hashes) {
      auto* b = benchmark::RegisterBenchmark(
          (std::string(hash_name) + "/" + size_name).c_str(), BM_Hash, hash,
          size);
      // 1 KiB, a typical body, also on several threads: how hashing scales
      // with the cores.
      if (size == 1024 && hash != Hash::kRecordId) {
        b->Apply(ThreadCounts);
      } else {
        b->UseRealTime()->Threads(1);
      }
    }
  }
}

}  // namespace

std::vector<std::string> SplitUriList(std::string_view list) {
  const std::vector<std::string> schemes = AvailableStoreSchemes();
  auto starts_uri = [&](std::string_view item) {
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) return false;
    const std::string_view scheme = item.substr(0, colon);
    for (const std::string& s : schemes) {
      if (scheme == s) return true;
    }
    return false;
  };
  std::vector<std::string> out;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (!item.empty() && !out.empty() && !starts_uri(item)) {
      out.back() += ",";
      out.back() += item;
    } else if (!item.empty()) {
      out.emplace_back(item);
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<StoreSpec> MakeSpecs(const std::vector<std::string>& uris) {
  std::map<std::string, int> total, seen;
  std::vector<std::string> schemes;
  for (const std::string& uri : uris) {
    std::string scheme = SchemeOf(uri);
    schemes.push_back(scheme.empty() ? "invalid" : scheme);
    ++total[schemes.back()];
  }
  std::vector<StoreSpec> specs;
  for (std::size_t i = 0; i < uris.size(); ++i) {
    const std::string& scheme = schemes[i];
    const int k = ++seen[scheme];
    specs.push_back(
        {total[scheme] > 1 ? scheme + "_" + std::to_string(k) : scheme,
         uris[i]});
  }
  return specs;
}

void RegisterAll(std::vector<StoreSpec>& specs, StoreSpec& sharded) {
  for (const StoreSpec& spec : specs) {
    benchmark::AddCustomContext("idem_store:" + spec.label, Redacted(spec.uri));
  }
  const Workload workloads[] = {
      Workload::kClaim,           Workload::kClaimComplete,
      Workload::kReplay,          Workload::kHotKeyInProgress,
      Workload::kHotKeyCompleted, Workload::kZipf};
  for (Workload w : workloads) {
    for (StoreSpec& spec : specs) {
      RegisterStoreRuns(std::string(WorkloadName(w)) + "/" + spec.label, spec,
                        w);
    }
    if (w != Workload::kClaimComplete) continue;
    RegisterStoreRuns("ClaimComplete/sharded_mutex", sharded, w);
    // The asynchronous calls of the stores that have them, from one
    // thread (as an adapter's I/O thread makes them).
    for (StoreSpec& spec : specs) {
      if (InMemory(spec)) continue;
      benchmark::RegisterBenchmark(("ClaimCompleteAsync/" + spec.label).c_str(),
                                   BM_ClaimCompleteAsync, &spec)
          ->UseRealTime()
          ->Threads(1);
    }
    for (StoreSpec& spec : specs) {
      if (!HasRawOp(spec.uri)) continue;
      benchmark::RegisterBenchmark(("RawWrite/" + spec.label).c_str(),
                                   BM_RawWrite, &spec)
          ->Apply(ThreadCounts);
    }
  }
  // Lock renewal, on every store and the baseline: one write per call.
  for (StoreSpec& spec : specs) {
    benchmark::RegisterBenchmark(("ExtendLock/" + spec.label).c_str(),
                                 BM_ExtendLock, &spec)
        ->Apply(ThreadCounts);
  }
  benchmark::RegisterBenchmark("ExtendLock/sharded_mutex", BM_ExtendLock,
                               &sharded)
      ->Apply(ThreadCounts);
  // The in-memory stores only: the lock-free store's contention against
  // its baseline's.
  for (StoreSpec& spec : specs) {
    if (!InMemory(spec)) continue;
    benchmark::RegisterBenchmark(("HotKeyExpiring/" + spec.label).c_str(),
                                 BM_HotKeyExpiring, &spec)
        ->Apply(ThreadCounts);
  }
  benchmark::RegisterBenchmark("HotKeyExpiring/sharded_mutex",
                               BM_HotKeyExpiring, &sharded)
      ->Apply(ThreadCounts);
  RegisterHashing();
  RegisterGuardRenewal();
}

}  // namespace idem::bench
