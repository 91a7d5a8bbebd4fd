// The store contract suite on the lock-free in-memory store.

#include <memory>
#include <utility>

#include "contract/store_contract.h"
#include "idem/memory_store.h"

IDEM_INSTANTIATE_STORE_CONTRACT(
    Memory, idem::testing::StoreFactory{
                .name = "memory",
                .open = [](const idem::testing::StoreTestContext&)
                    -> idem::Result<std::unique_ptr<idem::Store>> {
                  auto store =
                      idem::MemoryStore::Open(idem::MemoryStoreOptions{});
                  if (!store) return tl::make_unexpected(store.error());
                  return std::unique_ptr<idem::Store>(std::move(*store));
                }});
