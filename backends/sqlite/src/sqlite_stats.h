// SqliteStore::Stats's query: the records of a connection's snapshot of the
// file counted by state and expiry (kStats in sqlite_sql.h).

#ifndef IDEM_BACKENDS_SQLITE_SQLITE_STATS_H_
#define IDEM_BACKENDS_SQLITE_SQLITE_STATS_H_

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/store.h"
#include "sqlite_connection.h"

namespace idem::sqlite_internal {

// One SELECT count(*) ... GROUP BY on `conn`. Counts by the columns; a
// live row whose state column is neither in progress nor completed is
// damaged. Errors: kUnavailable (SQLITE_BUSY, I/O).
Result<StoreStats> CountRecords(Connection& conn, TimePoint now);

}  // namespace idem::sqlite_internal

#endif  // IDEM_BACKENDS_SQLITE_SQLITE_STATS_H_
