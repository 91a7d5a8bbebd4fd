// The SQL side of the demo's transfers (transfers.h): one transaction per
// transfer on the store's own database, the crash points X-Demo-Crash
// names, and the SQL store the demo opens for itself. Private to the demo.
//
// Thread-safety: a Database's calls may run concurrently on any number of
// threads (each takes a connection or the store's writer of its own).

#ifndef IDEM_DEMO_TRANSFERS_DATABASE_H_
#define IDEM_DEMO_TRANSFERS_DATABASE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "idem/beast/handler.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "idem/store.h"
#include "idem/store/local_cache.h"
#include "transfers.h"

namespace idem::demo {

// Where POST /transfers aborts the process (X-Demo-Crash).
enum class Crash { kNone, kBeforeCommit, kAfterCommit };

class Transfers::Database {
 public:
  virtual ~Database() = default;
  // Inserts transfer `id` and commits, completing `claim` in the same
  // transaction when it is active (exactly once); aborts at `crash`.
  virtual Result<beast::Response> Insert(ClaimHandle& claim,
                                         const std::string& id,
                                         std::string_view body,
                                         const beast::Response& created,
                                         Crash crash) = 0;
  // The rows in `transfers`.
  virtual Result<std::int64_t> Count() = 0;
};

// The typed SQLite or PostgreSQL store `store_uri` names, and its sweep
// interval (the URI's sweep_interval_s, else `sweep` unchanged), or nullptr
// for another scheme. A postgresql: URI's local cache parameters go to
// `*cache` (ignored when it is null: an instance of the store's own).
// Errors: the URI's, the store's.
Result<std::unique_ptr<Store>> OpenTypedSqlStore(
    std::string_view store_uri, Duration& sweep,
    LocalCacheOptions* cache = nullptr);

// The transfers of `store` (a typed store OpenTypedSqlStore opened, or
// another: nullptr), with the `transfers` table created; a PostgreSQL
// server that is not there yet (connect=lazy) is no error: the first
// transfer creates the table. `store_uri` without its query is libpq's
// connection URI. Errors: the connection's or the table's.
Result<std::unique_ptr<Transfers::Database>> OpenTransfersDatabase(
    Store* store, std::string_view store_uri);

}  // namespace idem::demo

#endif  // IDEM_DEMO_TRANSFERS_DATABASE_H_
