#include "idem/open_store.h"

#include <chrono>
#include <cstdint>
#include <utility>

#include "idem/store_uri.h"
#include "idem/sweeper.h"

#ifdef IDEM_HAVE_MEMORY
#include "idem/memory_store.h"
#endif
#ifdef IDEM_HAVE_ROCKSDB
#include "idem/rocksdb_store.h"
#endif
#ifdef IDEM_HAVE_SQLITE
#include "idem/sqlite_store.h"
#endif
#ifdef IDEM_HAVE_POSTGRES
#include "idem/postgres_store.h"
#endif
#ifdef IDEM_HAVE_REDIS
#include "idem/redis_store.h"
#endif

namespace idem {
namespace {

using Opener = Result<std::unique_ptr<Store>> (*)(StoreUri&,
                                                  const StoreOptions&);

struct Backend {
  const char* scheme;
  Opener open;
};

// Explicit, in one place: no static self-registration, so what a binary can
// open is exactly what it links.
constexpr Backend kBackends[] = {
#ifdef IDEM_HAVE_MEMORY
    {"memory", &MemoryStore::OpenFromUri},
#endif
#ifdef IDEM_HAVE_ROCKSDB
    {"rocksdb", &RocksdbStore::OpenFromUri},
#endif
#ifdef IDEM_HAVE_SQLITE
    {"sqlite", &SqliteStore::OpenFromUri},
#endif
#ifdef IDEM_HAVE_POSTGRES
    {"postgresql", &PostgresStore::OpenFromUri},
    {"postgres", &PostgresStore::OpenFromUri},
#endif
#ifdef IDEM_HAVE_REDIS
    {"redis", &RedisStore::OpenFromUri},
    {"redis-cluster", &RedisStore::OpenFromUri},
#endif
    {nullptr, nullptr},
};

}  // namespace

Result<std::unique_ptr<Store>> OpenStore(std::string_view uri,
                                         const StoreOptions& options) {
#ifdef IDEM_HAVE_REDIS
  // A Redis Cluster URI lists hosts with commas, which RFC 3986 does not
  // allow: the store rewrites it into a form StoreUri parses.
  const std::string rewritten = RedisStore::ClusterUriForParsing(uri);
  uri = rewritten;
#endif
  IDEM_ASSIGN_OR_RETURN(StoreUri parsed, StoreUri::Parse(uri));
  // Every scheme's: the sweeper is OpenStore's, not a backend's.
  SweeperOptions sweeper;
  sweeper.interval = options.sweep_interval;
  IDEM_RETURN_IF_ERROR(parsed.ReadDuration(
      "sweep_interval_s", sweeper.interval, std::chrono::seconds(0),
      std::chrono::duration_cast<std::chrono::seconds>(kMaxSweepInterval)));
  sweeper.clock = options.clock;
  sweeper.log = options.log;
  sweeper.metrics = options.metrics;
  if (sweeper.interval < Duration::zero() ||
      sweeper.interval > kMaxSweepInterval) {
    return tl::unexpected(parsed.InvalidArgument(
        "StoreOptions::sweep_interval must be from 0 to 24 h"));
  }
  for (const Backend& b : kBackends) {
    if (b.scheme != nullptr && parsed.scheme() == b.scheme) {
      IDEM_ASSIGN_OR_RETURN(auto store, b.open(parsed, options));
      return WithSweeper(std::move(store), std::move(sweeper));
    }
  }
  std::string known;
  for (const std::string& s : AvailableStoreSchemes()) {
    known += known.empty() ? "" : ", ";
    known += s + ":";
  }
  return tl::unexpected(
      parsed.InvalidArgument("unknown store scheme '" + parsed.scheme() +
                             "' (this build has: " + known + ")"));
}

std::vector<std::string> AvailableStoreSchemes() {
  std::vector<std::string> out;
  for (const Backend& b : kBackends) {
    if (b.scheme != nullptr) out.emplace_back(b.scheme);
  }
  return out;
}

}  // namespace idem
