// RocksdbStore::OpenFromUri: a `rocksdb:` URI's path and parameters into
// RocksdbStoreOptions (rocksdb_store.h).

#include <limits>
#include <memory>
#include <utility>

#include "idem/rocksdb_store.h"
#include "idem/store_uri.h"

namespace idem {

Result<std::unique_ptr<Store>> RocksdbStore::OpenFromUri(
    StoreUri& uri, const StoreOptions& options) {
  if (uri.scheme() != "rocksdb") {
    return tl::unexpected(
        uri.InvalidArgument("scheme '" + uri.scheme() + "' is not rocksdb"));
  }
  IDEM_RETURN_IF_ERROR(uri.RequireLocalPath(
      "the rocksdb store takes a directory: rocksdb:/path/dir"));
  // The URI gives values; Open alone judges them (its errors then name the
  // URI).
  RocksdbStoreOptions rocksdb_options;
  rocksdb_options.path = uri.path();
  IDEM_RETURN_IF_ERROR(uri.ReadBool("sync", rocksdb_options.sync));
  IDEM_RETURN_IF_ERROR(uri.ReadUint("block_cache_mb",
                                    rocksdb_options.block_cache_mb, 0,
                                    std::numeric_limits<std::size_t>::max()));
  IDEM_RETURN_IF_ERROR(uri.ReadBool("create", rocksdb_options.create));
  IDEM_RETURN_IF_ERROR(uri.RejectUnknown());
  auto store = Open(rocksdb_options, options);
  if (!store && store.error().code() == ErrorCode::kInvalidArgument) {
    return tl::unexpected(uri.InvalidArgument(store.error().message()));
  }
  if (!store) return tl::unexpected(store.error());
  return std::unique_ptr<Store>(std::move(*store));
}

}  // namespace idem
