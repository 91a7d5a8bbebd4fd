// Test helpers for the PostgreSQL store: the shared test server's URI, raw
// SQL through libpq, unique tables, and private servers that a test may
// stop and restart (scripts/postgres.sh with a state file of its own).
//
// The shared server comes from IDEM_TEST_POSTGRES_URI
// (postgresql://idem@127.0.0.1:PORT/idem, no query); scripts/test.sh starts
// one and exports it. Tests that need it skip without it, except under CI
// (the CI variable set), where they fail.
//
// Thread-safety: the free functions may be called from any thread; a
// PrivatePostgres is used by one thread.

#ifndef IDEM_TESTS_BACKENDS_POSTGRES_POSTGRES_TEST_UTIL_H_
#define IDEM_TESTS_BACKENDS_POSTGRES_POSTGRES_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "idem/log.h"

struct pg_conn;  // libpq's PGconn.

namespace idem::testing {

inline constexpr std::string_view kNoPostgres =
    "IDEM_TEST_POSTGRES_URI not set (export "
    "IDEM_TEST_POSTGRES_URI=$(scripts/postgres.sh start))";

// IDEM_TEST_POSTGRES_URI, or "" when unset.
std::string PostgresTestUri();

// Inside a TEST body or fixture SetUp: skips (or, under CI, fails) when
// IDEM_TEST_POSTGRES_URI is unset.
#define IDEM_REQUIRE_TEST_POSTGRES()                  \
  do {                                                \
    if (::idem::testing::PostgresTestUri().empty()) { \
      if (std::getenv("CI") != nullptr)               \
        FAIL() << ::idem::testing::kNoPostgres;       \
      GTEST_SKIP() << ::idem::testing::kNoPostgres;   \
    }                                                 \
  } while (0)

// `uri` with `params` ("a=1&b=2") appended to its query.
std::string WithParams(const std::string& uri, const std::string& params);

// A table name no other test (in this or another process) uses:
// `<prefix>_<pid>_<counter>_<random>`.
std::string UniquePostgresTable(std::string_view prefix);

struct PgConnDeleter {
  void operator()(pg_conn* c) const;
};
using PostgresConnection = std::unique_ptr<pg_conn, PgConnDeleter>;

// A libpq connection of the test's own to the server of `uri` (its idem
// query parameters ignored), whether or not it succeeded: check PQstatus.
PostgresConnection ConnectPostgres(const std::string& uri);

// Runs `sql` on `c` (e.g. an open transaction's statement of a test's own
// connection); true when it succeeded, else a test failure (EXPECT) naming
// the statement and the server's message.
bool PostgresExec(pg_conn* c, const std::string& sql);

// Runs `sql` (text parameters $1.. from `params`) on a fresh connection to
// the server of `uri` (its idem query parameters ignored). Returns the rows
// as text, bytea as PostgreSQL's hex form (\x...). Fails the current test
// (ADD_FAILURE) and returns nothing on an error.
std::vector<std::vector<std::string>> PostgresQuery(
    const std::string& uri, const std::string& sql,
    const std::vector<std::string>& params = {});

// Drops `table` and its idem_schema_versions row; errors are ignored.
void DropPostgresTable(const std::string& uri, const std::string& table);

// A LogSink for a store's background thread (a lazy store's connecting
// one): "level: message" lines under a mutex, read by the test while the
// thread may still log.
class SyncLog {
 public:
  // The sink; `this` must outlive the store it is given to.
  std::function<void(LogLevel, std::string_view)> Sink();
  // How many lines contain `needle`.
  int Count(std::string_view needle) const;
  // Every line, one per line, for failure messages.
  std::string All() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;  // Guarded by mu_.
};

// A server of the test's own, for tests that stop and restart it: a
// scripts/postgres.sh instance with its own state file in a temporary
// directory, stopped and deleted by the destructor.
class PrivatePostgres {
 public:
  PrivatePostgres();
  ~PrivatePostgres();
  PrivatePostgres(const PrivatePostgres&) = delete;
  PrivatePostgres& operator=(const PrivatePostgres&) = delete;

  // `scripts/postgres.sh start`: true when the server is up; url() is then
  // its URL. On false, error() says why.
  bool Start();
  // Stops the server, keeping its data and port (`pause`).
  bool Pause();
  // Starts it again on the same data and port (`resume`).
  bool Resume();
  // Stops (SIGSTOP) the server's processes: connections are accepted by the
  // kernel but nothing answers, as with a dropped network (`freeze`).
  bool Freeze();
  // Lets them run again (`thaw`).
  bool Thaw();
  // Stops it and deletes its data (`stop`); also done by the destructor.
  bool Stop();

  const std::string& url() const { return url_; }
  const std::string& error() const { return error_; }

 private:
  bool Run(const std::string& command, std::string* out);

  std::filesystem::path dir_;
  std::string url_;
  std::string error_;
  bool started_ = false;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_BACKENDS_POSTGRES_POSTGRES_TEST_UTIL_H_
