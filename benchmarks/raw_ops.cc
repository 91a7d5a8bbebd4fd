// See raw_ops.h. Each engine's part is in its store's folder
// (backends/<name>/bench/), listed in raw_engines.cc, which
// benchmarks/CMakeLists.txt generates from the enabled backends.

#include "raw_ops.h"

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "bench_util.h"
#include "idem/open_store.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/store/record_codec.h"
#include "idem/store_uri.h"
#include "run_store.h"

namespace idem::bench {

using std::chrono::hours;
using std::chrono::seconds;

namespace {

// The engine of `scheme`, or nullptr.
const RawEngine* FindEngine(const std::string& scheme) {
  for (const RawEngine* engine : RawEngines()) {
    for (std::string_view s : engine->schemes) {
      if (s == scheme) return engine;
    }
  }
  return nullptr;
}

}  // namespace

Record BenchRecord(RecordState state) {
  Record r;
  r.state = state;
  r.fingerprint = BenchFingerprint();
  r.locked_until = kStart + seconds(60);
  r.expires_at = kStart + hours(24);
  if (state == RecordState::kCompleted) {
    r.response = std::make_shared<const Response>(BenchResponse());
  }
  return r;
}

Status CreateSchema(std::string_view uri) {
  auto store = OpenStore(uri);
  if (!store) return tl::unexpected(store.error());
  return {};
}

bool HasRawOp(std::string_view uri) {
  auto parsed = ParseBenchUri(uri);
  return parsed && FindEngine(parsed->scheme()) != nullptr;
}

Result<std::unique_ptr<RawOp>> OpenRawOp(std::string_view uri, int threads) {
  auto parsed = ParseBenchUri(uri);
  if (!parsed) return tl::unexpected(parsed.error());
  const RawEngine* engine = FindEngine(parsed->scheme());
  if (engine == nullptr) {
    return tl::unexpected(
        parsed->InvalidArgument("no raw engine operation for scheme '" +
                                parsed->scheme() + "' in this build"));
  }
  return engine->open(*parsed, uri, threads);
}

}  // namespace idem::bench
