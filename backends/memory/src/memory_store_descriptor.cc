// The memory store's descriptor (idem/store/store_descriptor.h): how
// OpenStore, the contract suite and idem-bench find and set it up.

#include <filesystem>
#include <string>
#include <string_view>

#include "idem/memory_store.h"
#include "idem/store/store_descriptor.h"

namespace idem {

const StoreDescriptor& MemoryStoreDescriptor() {
  static const StoreDescriptor descriptor{
      .name = "memory",
      .schemes = {"memory"},
      .parameters = {"capacity", "max_bytes"},
      .open = &MemoryStore::OpenFromUri,
      .capabilities = {.name = "memory",
                       .durable = false,
                       .shared_across_processes = false,
                       .calls_may_block = false},
      .local_uri =
          [](const std::filesystem::path&) { return std::string("memory:"); },
      // Every memory store starts empty.
      .fresh_uri = [](std::string_view uri,
                      std::string_view) { return std::string(uri); },
      // The small capacity's small hash index puts several of the suite's
      // ids in each bucket; the suite holds at most 512 records at once.
      .setups = {{.label = "memory"},
                 {.label = "memory_small", .params = "capacity=1024"}},
  };
  return descriptor;
}

}  // namespace idem
