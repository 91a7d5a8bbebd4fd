// idem-bench-stored: what compressing and sealing stored responses cost and
// save (GuardOptions::compress_stored_above, response_keys). For JSON bodies
// of 1 KiB, 64 KiB and 1 MiB, on the memory store and RocksDB, one Guard
// claim and completion per iteration (Guard::BeginWithKey, then
// ClaimHandle::Finish, which puts the response in its stored form), in
// three modes: plain (compression off), zstd (the default: above 1 KiB,
// level 3) and zstd+sealed (AES-256-GCM). Counters: stored_bytes (the stored
// response's body and headers, as the store is handed them) and body_bytes.
// The report (benchmarks/report/section_stored.py) gives each mode's time
// and size as ratios to plain on the same store and size in the same run.
//
//   idem-bench-stored [--idem_stored_uris=memory:,rocksdb:DIR]
//                     [Google Benchmark flags]
//
// Records are revoked in batches of 64 with the timer paused, so that 1 MiB
// bodies do not fill the memory store or the disk.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench_util.h"
#include "idem/guard.h"
#include "idem/open_store.h"
#include "idem/record_id.h"
#include "idem/response_keys.h"

namespace idem::bench {
namespace {

enum class Mode { kPlain, kZstd, kZstdSealed };
constexpr const char* kModeNames[] = {"plain", "zstd", "zstd+sealed"};
constexpr std::size_t kBatch = 64;

// A JSON array of order objects, `size` bytes: what a list endpoint answers.
std::string JsonBody(std::size_t size) {
  std::string body = "[";
  for (std::uint64_t i = 0; body.size() < size; ++i) {
    body += "{\"id\":\"ord_" + std::to_string(Mix(i) % 100000000) +
            "\",\"amount\":" + std::to_string(Mix(i + 7) % 100000) +
            ",\"currency\":\"EUR\",\"status\":\"" +
            (i % 3 == 0 ? "paid" : "pending") + "\",\"customer\":\"cus_" +
            std::to_string(Mix(i + 13) % 1000) + "\"},";
  }
  body.back() = ']';
  body.resize(size);
  return body;
}

std::shared_ptr<const ResponseKeyRing> BenchKeys() {
  auto ring = ResponseKeyRing::Parse("bench:" + std::string(64, '7'));
  return ring ? *ring : nullptr;
}

void StoredResponse(benchmark::State& state, const std::string& uri,
                    std::size_t size, Mode mode) {
  StoreOptions store_options;
  store_options.sweep_interval = Duration::zero();
  auto opened = OpenStore(uri, store_options);
  if (!opened) {
    state.SkipWithError(opened.error().ToString().c_str());
    return;
  }
  GuardSetup setup;
  setup.store = std::shared_ptr<Store>(std::move(*opened));
  setup.options.max_stored_response = std::size_t{2} << 20;
  setup.options.compress_stored_above = mode == Mode::kPlain ? 0 : 1024;
  if (mode == Mode::kZstdSealed) setup.options.response_keys = BenchKeys();
  auto guard = Guard::Create(std::move(setup));
  if (!guard) {
    state.SkipWithError(guard.error().ToString().c_str());
    return;
  }
  const Response response{
      200, {{"Content-Type", "application/json"}}, JsonBody(size)};
  static std::uint64_t run = 0;
  const std::string prefix = "r" + std::to_string(++run) + "-";
  std::vector<std::string> keys;
  std::uint64_t n = 0;
  double stored_bytes = 0;
  auto revoke = [&] {
    for (const std::string& key : keys) {
      (void)(*guard)->store().Revoke(MakeRecordId("", key));
    }
    keys.clear();
  };
  // What the store holds of one response: its stored body and headers.
  auto measure = [&] {
    if (stored_bytes != 0 || keys.empty()) return;
    auto record = (*guard)->store().Inspect(MakeRecordId("", keys[0]),
                                            std::chrono::system_clock::now());
    if (!record || !*record || !(*record)->response) return;
    const Response& r = *(*record)->response;
    stored_bytes = static_cast<double>(r.body.size());
    for (const Header& h : r.headers) {
      stored_bytes += static_cast<double>(h.first.size() + h.second.size());
    }
  };
  for (auto _ : state) {
    std::string key = prefix + std::to_string(n++);
    Decision d = (*guard)->BeginWithKey("", key, "bench", "{}");
    if (d.action != Action::kExecute) {
      state.SkipWithError("the claim was not acquired");
      break;
    }
    if (d.claim.Finish(response) != FinishResult::kStored) {
      state.SkipWithError("the response was not stored");
      break;
    }
    keys.push_back(std::move(key));
    if (keys.size() == kBatch) {
      state.PauseTiming();
      measure();
      revoke();
      state.ResumeTiming();
    }
  }
  measure();
  revoke();
  state.counters["stored_bytes"] = stored_bytes;
  state.counters["body_bytes"] = static_cast<double>(size);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(size));
}

std::vector<std::string> Uris(int& argc, char** argv) {
  const std::string flag = "--idem_stored_uris=";
  std::string list;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]).rfind(flag, 0) == 0) {
      list = argv[i] + flag.size();
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  }
  if (list.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    const std::filesystem::path dir =
        std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
        ("idem-bench-stored-" + std::to_string(::getpid()));
    list = "memory:?max_bytes=4294967296,rocksdb:" + dir.string();
  }
  std::vector<std::string> uris;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = list.find(',', at);
    const std::size_t end = comma == std::string::npos ? list.size() : comma;
    if (end > at) uris.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  return uris;
}

// "memory", "rocksdb": the scheme, for benchmark names.
std::string Scheme(const std::string& uri) {
  return uri.substr(0, uri.find(':'));
}

}  // namespace
}  // namespace idem::bench

int main(int argc, char** argv) {
  using idem::bench::Mode;
  const std::vector<std::string> uris = idem::bench::Uris(argc, argv);
  for (const std::string& uri : uris) {
    for (std::size_t size :
         {std::size_t{1} << 10, std::size_t{64} << 10, std::size_t{1} << 20}) {
      for (Mode mode : {Mode::kPlain, Mode::kZstd, Mode::kZstdSealed}) {
        const std::string name =
            "StoredResponse/" + idem::bench::Scheme(uri) + "/" +
            std::to_string(size >> 10) + "KiB/" +
            idem::bench::kModeNames[static_cast<int>(mode)];
        benchmark::RegisterBenchmark(
            name.c_str(),
            [uri, size, mode](benchmark::State& state) {
              idem::bench::StoredResponse(state, uri, size, mode);
            })
            ->UseRealTime()
            ->Threads(1)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
