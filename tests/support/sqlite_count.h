// The rows of a table in a SQLite database, for tests that check what a
// transaction left behind. Header-only: its users link SQLite already (the
// SQLite store's tests, the HTTP transaction tests, the multi-instance test).

#ifndef IDEM_TESTS_SUPPORT_SQLITE_COUNT_H_
#define IDEM_TESTS_SUPPORT_SQLITE_COUNT_H_

#include <sqlite3.h>

#include <string>

namespace idem::testing {

// SELECT count(*) FROM `table` on `db`; -1 when the query fails.
inline long long SqliteCountRows(sqlite3* db, const std::string& table) {
  const std::string sql = "SELECT count(*) FROM " + table;
  sqlite3_stmt* stmt = nullptr;
  long long n = -1;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    n = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  return n;
}

// The same on a read-only connection of its own to the file at `path`
// (another process may be writing it: waits up to 10 s for its locks).
inline long long SqliteCountRows(const std::string& path,
                                 const std::string& table) {
  sqlite3* db = nullptr;
  long long n = -1;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) ==
      SQLITE_OK) {
    sqlite3_busy_timeout(db, 10000);
    n = SqliteCountRows(db, table);
  }
  sqlite3_close(db);
  return n;
}

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_SQLITE_COUNT_H_
