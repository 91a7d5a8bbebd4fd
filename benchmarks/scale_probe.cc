// The parts of idem-scale (idem_scale.cc) that fill a store and time its
// claims; what each measures is in idem_scale.cc's header.

#include "scale_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "idem/open_store.h"

namespace idem::scale {
namespace {

using bench::IdFor;
using bench::kStart;  // The process start time (bench_util.h).
using bench::Mix;
using std::chrono::hours;
using std::chrono::seconds;

// A distinct, hardly compressible body for record `i` (base64-like
// characters from a hash), so that neither allocation sharing nor RocksDB's
// compression flatters the numbers.
std::shared_ptr<const Response> BodyResponse(std::uint64_t i,
                                             std::size_t size) {
  static constexpr char kChars[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto r = std::make_shared<Response>();
  r->status = 201;
  r->body.resize(size);
  std::uint64_t bits = 0;
  for (std::size_t j = 0; j < size; ++j) {
    if (j % 10 == 0) bits = Mix(i * 1'000'003 + j);
    r->body[j] = kChars[bits & 63];
    bits >>= 6;
  }
  return r;
}

// Record `i`'s own fingerprint: real requests differ, and a fingerprint
// shared by every record would let RocksDB's block compression fold it away.
Fingerprint FingerprintFor(std::uint64_t i) {
  Fingerprint fp;
  for (std::size_t k = 0; k < fp.bytes.size(); k += 8) {
    const std::uint64_t v = Mix(i * 4 + k / 8 + 0x5eed);
    std::memcpy(fp.bytes.data() + k, &v, 8);
  }
  return fp;
}

struct Latency {
  double mean_ns, p50_ns, p90_ns, p99_ns, max_ns;
};

Latency Summarize(std::vector<double>& ns) {
  std::sort(ns.begin(), ns.end());
  double sum = 0;
  for (double v : ns) sum += v;
  auto at = [&](double q) {
    return ns[std::min(ns.size() - 1, static_cast<std::size_t>(q * ns.size()))];
  };
  return {sum / ns.size(), at(0.5), at(0.9), at(0.99), ns.back()};
}

// Times `probes` claims: new ids from `*next_new` on, or (`replay`)
// replays of random ids in [0, held), drawn from a working set of
// `working_set` of them (revisited when smaller than `probes`).
Latency Probe(Store& store, bool replay, std::size_t held, std::size_t probes,
              std::size_t working_set, std::uint64_t* next_new) {
  std::vector<double> ns;
  ns.reserve(probes);
  for (std::size_t i = 0; i < probes; ++i) {
    const std::uint64_t key =
        replay ? Mix(i % working_set * 7919 + held) % held : (*next_new)++;
    const RecordId id = IdFor(key);
    const Fingerprint fp = FingerprintFor(key);
    const auto start = Clock::now();
    auto claim = store.Claim(id, fp, kStart, hours(24), seconds(60));
    const auto end = Clock::now();
    if (!claim) Die("probe: " + claim.error().ToString());
    const ClaimOutcome want =
        replay ? ClaimOutcome::kCompleted : ClaimOutcome::kAcquired;
    if (claim->outcome != want) Die("probe: unexpected outcome");
    ns.push_back(std::chrono::duration<double, std::nano>(end - start).count());
  }
  return Summarize(ns);
}

void PrintLatency(const std::string& store, const std::string& config,
                  std::size_t held, const char* op, const Latency& l) {
  std::printf(
      "latency store=%s config=%s held=%zu op=%s mean_ns=%.0f p50_ns=%.0f "
      "p90_ns=%.0f p99_ns=%.0f max_ns=%.0f\n",
      store.c_str(), config.c_str(), held, op, l.mean_ns, l.p50_ns, l.p90_ns,
      l.p99_ns, l.max_ns);
  std::fflush(stdout);
}

}  // namespace

// A field of /proc/self/status in bytes (VmHWM, VmRSS), 0 when absent.
std::size_t ProcStatusBytes(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.compare(0, field.size(), field) == 0 &&
        line.size() > field.size() && line[field.size()] == ':') {
      return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10) * 1024;
    }
  }
  return 0;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "idem-scale: %s\n", what.c_str());
  std::exit(1);
}

// Claims and completes ids [from, to) with their own bodies (`body` > 0) or
// one shared response (`body` == 0: the latency runs, where only the index
// matters), on `threads` threads.
void Fill(Store& store, std::uint64_t from, std::uint64_t to, std::size_t body,
          int threads) {
  const auto shared = BodyResponse(0, 64);
  auto work = [&](int t) {
    for (std::uint64_t i = from + t; i < to; i += threads) {
      const RecordId id = IdFor(i);
      auto claim =
          store.Claim(id, FingerprintFor(i), kStart, hours(24), seconds(60));
      if (!claim) Die("fill claim: " + claim.error().ToString());
      if (claim->outcome != ClaimOutcome::kAcquired) Die("fill: not acquired");
      auto done = store.CompleteShared(
          id, claim->token, body > 0 ? BodyResponse(i, body) : shared);
      if (!done || !*done) Die("fill: not completed");
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
}

double ClockCostNs() {
  constexpr int kN = 100'000;
  const auto start = Clock::now();
  for (int i = 0; i < kN; ++i) {
    auto t = Clock::now();
    asm volatile("" : : "r"(&t) : "memory");
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - start)
             .count() /
         kN;
}

std::unique_ptr<Store> Open(const std::string& uri) {
  auto store = OpenStore(uri);
  if (!store) Die(store.error().ToString());
  return std::move(*store);
}

// Probes a store that holds `held` records: new ids, replays over all
// records, and replays over `small` of them, so that the working set, and
// with it the cache misses, is the same whatever the table's size.
void ProbeBoth(Store& store, const std::string& name, const std::string& config,
               std::size_t held, std::size_t small, std::size_t probes,
               std::uint64_t* next_new) {
  PrintLatency(name, config, held, "claim_new",
               Probe(store, false, held, probes, probes, next_new));
  PrintLatency(name, config, held, "claim_replay",
               Probe(store, true, held, probes, probes, next_new));
  PrintLatency(
      name, config, held, "claim_replay_small_set",
      Probe(store, true, held, probes, std::min(small, held), next_new));
}

}  // namespace idem::scale
