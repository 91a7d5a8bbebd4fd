#include "idem/open_store.h"

#include "idem/store_uri.h"

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
    {nullptr, nullptr},
};

}  // namespace

Result<std::unique_ptr<Store>> OpenStore(std::string_view uri,
                                         const StoreOptions& options) {
  auto parsed = StoreUri::Parse(uri);
  if (!parsed) return tl::unexpected(parsed.error());
  for (const Backend& b : kBackends) {
    if (b.scheme != nullptr && parsed->scheme() == b.scheme) {
      return b.open(*parsed, options);
    }
  }
  std::string known;
  for (const std::string& s : AvailableStoreSchemes()) {
    known += known.empty() ? "" : ", ";
    known += s + ":";
  }
  return tl::unexpected(
      parsed->InvalidArgument("unknown store scheme '" + parsed->scheme() +
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
