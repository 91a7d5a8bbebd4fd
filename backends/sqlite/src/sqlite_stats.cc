#include "sqlite_stats.h"

#include <sqlite3.h>

#include <string>

#include "sqlite_sql.h"

namespace idem::sqlite_internal {

Result<StoreStats> CountRecords(Connection& conn, TimePoint now) {
  IDEM_ASSIGN_OR_RETURN(sqlite3_stmt * stmt, conn.Prepared(kStats, "stats"));
  StatementScope scope(stmt);
  sqlite3_bind_int64(stmt, 1, ToUnixNanos(now));
  StoreStats stats;
  for (;;) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) return stats;
    if (rc != SQLITE_ROW) return tl::unexpected(conn.SqlError("stats", rc));
    stats.CountRows(sqlite3_column_int(stmt, 0) != 0,
                    sqlite3_column_int64(stmt, 1),
                    static_cast<std::uint64_t>(sqlite3_column_int64(stmt, 2)));
  }
}

}  // namespace idem::sqlite_internal
