// The store contract suite on the SQLite store, once as configured by
// default (synchronous=normal) and once with synchronous=full, each test
// with its own database file in its own fresh directory.

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "contract/store_contract.h"
#include "idem/sqlite_store.h"

namespace {

idem::testing::StoreFactory SqliteFactory(std::string name,
                                          idem::SqliteSynchronous sync) {
  return {.name = std::move(name),
          .open = [sync](const idem::testing::StoreTestContext& context)
              -> idem::Result<std::unique_ptr<idem::Store>> {
            // No sweeper: the suite counts what PurgeExpired deletes. A long
            // busy timeout: the concurrency tests put 32 writers on one file
            // of a loaded (or sanitized) machine.
            auto store = idem::SqliteStore::Open(
                {.path = (context.dir / "idem.db").string(),
                 .synchronous = sync,
                 .busy_timeout = std::chrono::seconds(60)});
            if (!store) return tl::make_unexpected(store.error());
            return std::unique_ptr<idem::Store>(std::move(*store));
          }};
}

}  // namespace

IDEM_INSTANTIATE_STORE_CONTRACT(
    Sqlite, SqliteFactory("sqlite", idem::SqliteSynchronous::kNormal));
IDEM_INSTANTIATE_STORE_CONTRACT(SqliteFull,
                                SqliteFactory("sqlite_full",
                                              idem::SqliteSynchronous::kFull));
