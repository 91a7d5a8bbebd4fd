// The store contract suite on the RocksDB store, once as configured by
// default and once with sync=true (every write fsync'ed), each test in its
// own fresh directory.

#include <memory>
#include <string>
#include <utility>

#include "contract/store_contract.h"
#include "idem/clock.h"
#include "idem/rocksdb_store.h"

namespace {

idem::testing::StoreFactory RocksdbFactory(std::string name, bool sync) {
  return {.name = std::move(name),
          .open = [sync](const idem::testing::StoreTestContext& context)
              -> idem::Result<std::unique_ptr<idem::Store>> {
            // The compaction filter gets a clock that never moves, so only
            // PurgeExpired deletes records: the suite counts what it purges
            // and may run RocksDB into a background compaction.
            idem::StoreOptions options;
            options.clock =
                std::make_shared<idem::ManualClock>(idem::TimePoint{});
            auto store = idem::RocksdbStore::Open(
                {.path = (context.dir / "db").string(), .sync = sync}, options);
            if (!store) return tl::make_unexpected(store.error());
            return std::unique_ptr<idem::Store>(std::move(*store));
          }};
}

}  // namespace

IDEM_INSTANTIATE_STORE_CONTRACT(Rocksdb, RocksdbFactory("rocksdb", false));
IDEM_INSTANTIATE_STORE_CONTRACT(RocksdbSync,
                                RocksdbFactory("rocksdb_sync", true));
