// See run_state.h.

#include "run_state.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "baseline/sharded_mutex_store.h"
#include "idem/open_store.h"
#include "run_store.h"

namespace idem::bench {
namespace {

// A memory: run never gets more room than this: 2^25 records of ~400 bytes
// is the most a run may take of a shared machine's memory.
constexpr std::size_t kMaxMemoryCapacity = std::size_t{1} << 25;

Run* g_run = nullptr;
int g_run_number = 0;

std::size_t MemoryCapacity(std::size_t records) {
  return std::min(records + records / 8 + 1024, kMaxMemoryCapacity);
}

}  // namespace

bool IsServer(const std::string& uri) {
  const StoreDescriptor* store = StoreOf(uri);
  return store != nullptr && store->local_uri == nullptr;
}

Run* OpenRun(benchmark::State& state, StoreSpec& spec, std::size_t records,
             bool raw) {
  if (state.thread_index() != 0) return nullptr;
  std::optional<std::string>& known = raw ? spec.raw_error : spec.store_error;
  if (known) {
    state.SkipWithError(known->c_str());
    return nullptr;
  }
  auto run = std::make_unique<Run>();
  if (spec.uri.empty()) {
    run->store = std::make_unique<bench::ShardedMutexStore>(records);
    return g_run = run.release();
  }
  const std::string uri =
      RunStoreUri(spec.uri, ++g_run_number, MemoryCapacity(records));
  std::string error;
  if (raw) {
    auto op = OpenRawOp(uri, state.threads());
    if (op) {
      run->raw = std::move(*op);
    } else {
      error = op.error().ToString();
    }
  } else {
    auto store = OpenStore(uri);
    if (store) {
      run->store = std::move(*store);
    } else {
      error = store.error().ToString();
    }
  }
  // A server that refused us has no table to drop; files may have been
  // made before an open failed.
  if (error.empty() || !IsServer(uri)) {
    run->uri = uri;
  }
  if (!error.empty()) {
    RemoveRunStore(run->uri);
    known = error;
    state.SkipWithError(error.c_str());
    return nullptr;
  }
  return g_run = run.release();
}

void CloseRun(benchmark::State& state) {
  if (state.thread_index() != 0 || g_run == nullptr) return;
  std::unique_ptr<Run> run(g_run);
  g_run = nullptr;
  run->store.reset();
  run->raw.reset();
  if (!run->uri.empty()) RemoveRunStore(run->uri);
}

Run* CurrentRun(benchmark::State& state) {
  if (g_run == nullptr) state.SkipWithError("no store for this run");
  return g_run;
}

}  // namespace idem::bench
