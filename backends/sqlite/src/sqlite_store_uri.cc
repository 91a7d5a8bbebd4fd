// SqliteStore::OpenFromUri: a `sqlite:` URI's path and parameters into
// SqliteStoreOptions (sqlite_store.h); Open judges the values.

#include <chrono>
#include <memory>
#include <utility>

#include "idem/sqlite_store.h"
#include "idem/store_uri.h"

namespace idem {

Result<std::unique_ptr<Store>> SqliteStore::OpenFromUri(
    StoreUri& uri, const StoreOptions& options) {
  if (uri.scheme() != "sqlite") {
    return tl::unexpected(
        uri.InvalidArgument("scheme '" + uri.scheme() + "' is not sqlite"));
  }
  IDEM_RETURN_IF_ERROR(uri.RequireLocalPath(
      "the sqlite store takes a file: sqlite:/path/file.db"));
  SqliteStoreOptions sqlite_options;
  sqlite_options.path = uri.path();
  IDEM_RETURN_IF_ERROR(uri.ReadEnum("synchronous", sqlite_options.synchronous,
                                    {{"off", SqliteSynchronous::kOff},
                                     {"normal", SqliteSynchronous::kNormal},
                                     {"full", SqliteSynchronous::kFull},
                                     {"extra", SqliteSynchronous::kExtra}}));
  IDEM_RETURN_IF_ERROR(uri.ReadDuration(
      "busy_timeout_ms", sqlite_options.busy_timeout,
      std::chrono::milliseconds(0), SqliteStoreOptions::kMaxBusyTimeout));
  IDEM_RETURN_IF_ERROR(uri.ReadUint("cache_mb", sqlite_options.cache_mb, 0,
                                    SqliteStoreOptions::kMaxCacheMb));
  IDEM_RETURN_IF_ERROR(uri.ReadBool("create", sqlite_options.create));
  IDEM_RETURN_IF_ERROR(uri.RejectUnknown());
  IDEM_ASSIGN_OR_RETURN(auto store, Open(sqlite_options, options));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace idem
