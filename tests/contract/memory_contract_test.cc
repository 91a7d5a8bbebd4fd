// The store contract suite on the lock-free in-memory store: once with the
// default options, once with a small capacity, whose small hash index puts
// several of the suite's ids in each bucket.

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "contract/store_contract.h"
#include "idem/memory_store.h"

namespace {

idem::testing::StoreFactory MemoryFactory(std::string name,
                                          idem::MemoryStoreOptions options) {
  return {.name = std::move(name),
          .open = [options](const idem::testing::StoreTestContext&)
              -> idem::Result<std::unique_ptr<idem::Store>> {
            auto store = idem::MemoryStore::Open(options);
            if (!store) return tl::make_unexpected(store.error());
            return std::unique_ptr<idem::Store>(std::move(*store));
          }};
}

// The suite holds at most 512 records at once (its random workload).
constexpr std::size_t kSmallCapacity = 1024;

}  // namespace

IDEM_INSTANTIATE_STORE_CONTRACT(Memory, MemoryFactory("memory", {}));
IDEM_INSTANTIATE_STORE_CONTRACT(MemorySmall,
                                MemoryFactory("memory_small",
                                              {.capacity = kSmallCapacity}));
