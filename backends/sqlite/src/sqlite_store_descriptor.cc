// The SQLite store's descriptor (idem/store/store_descriptor.h): how
// OpenStore, the contract suite and idem-bench find and set it up.

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include "idem/sqlite_store.h"
#include "idem/store/store_descriptor.h"
#include "idem/store_uri.h"

namespace idem {

const StoreDescriptor& SqliteStoreDescriptor() {
  static const StoreDescriptor descriptor{
      .name = "sqlite",
      .schemes = {"sqlite"},
      .parameters = {"synchronous", "busy_timeout_ms", "cache_mb", "create"},
      .open = &SqliteStore::OpenFromUri,
      .capabilities = {.name = "sqlite",
                       .durable = true,
                       .shared_across_processes = true,
                       .async_calls = true},
      .local_uri =
          [](const std::filesystem::path& dir) {
            return "sqlite:" + (dir / "idem.db").string();
          },
      // A sibling file: "-<name>" before the file name's extension.
      .fresh_uri =
          [](std::string_view uri, std::string_view name) {
            const std::size_t q = uri.find('?');
            std::string head(uri.substr(0, q));
            const std::size_t slash = head.find_last_of("/:");
            const std::size_t dot = head.find_last_of('.');
            const std::size_t at =
                dot != std::string::npos && dot > slash ? dot : head.size();
            head.insert(at, "-" + std::string(name));
            return head + std::string(
                              q == std::string_view::npos ? "" : uri.substr(q));
          },
      .remove =
          [](std::string_view uri) {
            auto parsed = StoreUri::Parse(uri);
            if (!parsed || parsed->path().empty()) return;
            std::error_code ec;
            for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
              std::filesystem::remove(parsed->path() + suffix, ec);
            }
          },
      // A long busy timeout: the concurrency tests put 32 writers on one
      // file of a loaded (or sanitized) machine.
      .setups = {{.label = "sqlite",
                  .params = "busy_timeout_ms=60000",
                  .through_async_calls = true},
                 {.label = "sqlite_full",
                  .params = "synchronous=full&busy_timeout_ms=60000"}},
  };
  return descriptor;
}

}  // namespace idem
