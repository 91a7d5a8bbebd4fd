// The store contract suite on the test-only ShardedMutexStore, the second
// implementation that keeps the suite honest.

#include <memory>

#include "contract/store_contract.h"
#include "support/sharded_mutex_store.h"

IDEM_INSTANTIATE_STORE_CONTRACT(
    ShardedMutex,
    idem::testing::StoreFactory{
        .name = "sharded_mutex",
        .open = [](const idem::testing::StoreTestContext&)
            -> idem::Result<std::unique_ptr<idem::Store>> {
          return std::make_unique<idem::testing::ShardedMutexStore>();
        }});
