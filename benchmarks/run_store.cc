// See run_store.h.

#include "run_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "idem/store/store_descriptor.h"
#include "idem/store_registry.h"
#include "idem/store_uri.h"

namespace idem::bench {
namespace {

// A run's name: its subdirectory, file suffix, table or key prefix.
std::string RunName(int run) {
  return "idem_bench_" + std::to_string(::getpid()) + "_" + std::to_string(run);
}

}  // namespace

Result<StoreUri> ParseBenchUri(std::string_view uri) {
  return StoreUri::Parse(ParseableStoreUri(uri));
}

const StoreDescriptor* StoreOf(std::string_view uri) {
  return FindStoreByScheme(SchemeOf(uri));
}

std::string SchemeOf(std::string_view uri) {
  auto parsed = ParseBenchUri(uri);
  return parsed ? parsed->scheme() : std::string();
}

std::string Redacted(std::string_view uri) { return RedactUri(uri); }

std::string RunStoreUri(std::string_view uri, int run,
                        std::size_t memory_capacity) {
  const StoreDescriptor* store = StoreOf(uri);
  if (store == nullptr) return std::string(uri);
  if (InMemoryStore(*store)) {
    // Bounded by records only (the byte budget's default would stop a large
    // run halfway); 1 TiB is the largest max_bytes the memory store takes.
    return std::string(store->schemes.front()) +
           ":?capacity=" + std::to_string(memory_capacity) +
           "&max_bytes=1099511627776";
  }
  return store->fresh_uri(uri, RunName(run));
}

void RemoveRunStore(std::string_view run_uri) {
  const StoreDescriptor* store = StoreOf(run_uri);
  if (store != nullptr && store->remove != nullptr) store->remove(run_uri);
}

bool InMemoryStore(const StoreDescriptor& store) {
  return !store.capabilities.durable &&
         !store.capabilities.shared_across_processes;
}

std::vector<std::string> DefaultStoreUris(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const StoreDescriptor* store : RegisteredStores()) {
    if (store->local_uri != nullptr) {
      out.push_back(store->local_uri(dir));
      continue;
    }
    for (const StoreTestSetup& setup : store->setups) {
      const char* server = std::getenv(std::string(setup.server_env).c_str());
      // Several setups share a server (a store with and without its local
      // cache): run it once.
      if (server != nullptr && *server != '\0' &&
          std::find(out.begin(), out.end(), server) == out.end()) {
        out.emplace_back(server);
      }
    }
  }
  return out;
}

}  // namespace idem::bench
