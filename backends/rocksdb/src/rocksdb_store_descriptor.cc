// The RocksDB store's descriptor (idem/store/store_descriptor.h): how
// OpenStore, the contract suite and idem-bench find and set it up.

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "idem/rocksdb_store.h"
#include "idem/store/store_descriptor.h"
#include "idem/store_uri.h"

namespace idem {

const StoreDescriptor& RocksdbStoreDescriptor() {
  static const StoreDescriptor descriptor{
      .name = "rocksdb",
      .schemes = {"rocksdb"},
      .parameters = {"sync", "block_cache_mb", "create"},
      .open = &RocksdbStore::OpenFromUri,
      .capabilities = {.name = "rocksdb",
                       .durable = true,
                       .shared_across_processes = false,
                       .async_calls = true},
      .local_uri =
          [](const std::filesystem::path& dir) {
            return "rocksdb:" + (dir / "rocksdb").string();
          },
      // A subdirectory of the store's directory.
      .fresh_uri =
          [](std::string_view uri, std::string_view name) {
            const std::size_t q = uri.find('?');
            std::string head(uri.substr(0, q));
            if (head.back() != '/') head += '/';
            return head + std::string(name) +
                   std::string(q == std::string_view::npos ? ""
                                                           : uri.substr(q));
          },
      .remove =
          [](std::string_view uri) {
            auto parsed = StoreUri::Parse(uri);
            if (!parsed || parsed->path().empty()) return;
            std::error_code ec;
            std::filesystem::remove_all(parsed->path(), ec);
          },
      .setups = {{.label = "rocksdb", .through_async_calls = true},
                 {.label = "rocksdb_sync", .params = "sync=true"}},
  };
  return descriptor;
}

}  // namespace idem
