#include "postgres_test_util.h"

#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <system_error>

#include <gtest/gtest.h>

#include "support/built_path.h"
#include "support/shell_command.h"

#ifndef IDEM_POSTGRES_SCRIPT
#error "IDEM_POSTGRES_SCRIPT must name scripts/postgres.sh"
#endif

namespace idem::testing {
namespace {

// libpq's URI parser rejects idem's parameters (table=, pool=, ...).
std::string WithoutQuery(const std::string& uri) {
  return uri.substr(0, uri.find('?'));
}

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};

}  // namespace

void PgConnDeleter::operator()(pg_conn* c) const { PQfinish(c); }

PostgresConnection ConnectPostgres(const std::string& uri) {
  return PostgresConnection(PQconnectdb(WithoutQuery(uri).c_str()));
}

bool PostgresExec(pg_conn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const ExecStatusType s = PQresultStatus(r);
  const bool ok = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
  EXPECT_TRUE(ok) << sql << ": " << PQresultErrorMessage(r);
  PQclear(r);
  return ok;
}

std::string PostgresTestUri() {
  const char* uri = std::getenv("IDEM_TEST_POSTGRES_URI");
  return uri != nullptr ? uri : "";
}

std::string WithParams(const std::string& uri, const std::string& params) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + params;
}

std::string UniquePostgresTable(std::string_view prefix) {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", rd());
  return std::string(prefix) + "_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter.fetch_add(1)) + "_" + suffix;
}

std::vector<std::vector<std::string>> PostgresQuery(
    const std::string& uri, const std::string& sql,
    const std::vector<std::string>& params) {
  std::vector<std::vector<std::string>> rows;
  const PostgresConnection conn = ConnectPostgres(uri);
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    ADD_FAILURE() << "connect " << uri << ": " << PQerrorMessage(conn.get());
    return rows;
  }
  std::vector<const char*> values;
  for (const std::string& p : params) values.push_back(p.c_str());
  std::unique_ptr<PGresult, ResultDeleter> r(
      PQexecParams(conn.get(), sql.c_str(), static_cast<int>(values.size()),
                   nullptr, values.data(), nullptr, nullptr, 0));
  const ExecStatusType status = PQresultStatus(r.get());
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    ADD_FAILURE() << sql << ": " << PQresultErrorMessage(r.get());
    return rows;
  }
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    std::vector<std::string> row;
    for (int j = 0; j < PQnfields(r.get()); ++j) {
      row.emplace_back(PQgetvalue(r.get(), i, j));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

void DropPostgresTable(const std::string& uri, const std::string& table) {
  const PostgresConnection conn = ConnectPostgres(uri);
  if (PQstatus(conn.get()) != CONNECTION_OK) return;
  const std::string sql =
      "DROP TABLE IF EXISTS \"" + table +
      "\"; DELETE FROM idem_schema_versions WHERE table_name = '" + table + "'";
  PQclear(PQexec(conn.get(), sql.c_str()));
}

PrivatePostgres::PrivatePostgres() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "idem-pg-private-XXXXXX")
          .string();
  if (::mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
}

PrivatePostgres::~PrivatePostgres() {
  if (started_) Stop();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

bool PrivatePostgres::Run(const std::string& command, std::string* out) {
  if (dir_.empty()) {
    error_ = "no temporary directory";
    return false;
  }
  // The script's own messages go to the test's stderr; its stdout (the
  // URL) is captured.
  // IDEM_PG_OWNER_PID: the script's watchdog stops the server if this
  // process dies before the destructor runs (an abort, a signal).
  const std::string line =
      "IDEM_PG_OWNER_PID=" + std::to_string(::getpid()) + " IDEM_PG_STATE='" +
      (dir_ / "state").string() + "' '" +
      ::idem::testing::BuiltPath(IDEM_POSTGRES_SCRIPT) + "' " + command;
  std::string error;
  if (RunShellCommand(line, out, &error)) return true;
  error_ = "scripts/postgres.sh " + command + " " + error;
  return false;
}

bool PrivatePostgres::Start() {
  std::string url;
  if (!Run("start", &url)) return false;
  started_ = true;
  url_ = url;
  return true;
}

bool PrivatePostgres::Pause() { return Run("pause", nullptr); }

bool PrivatePostgres::Resume() { return Run("resume", nullptr); }

bool PrivatePostgres::Freeze() { return Run("freeze", nullptr); }

bool PrivatePostgres::Thaw() { return Run("thaw", nullptr); }

bool PrivatePostgres::Stop() {
  started_ = false;
  return Run("stop", nullptr);
}

std::function<void(LogLevel, std::string_view)> SyncLog::Sink() {
  return [this](LogLevel level, std::string_view message) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::string(LogLevelName(level)) + ": " +
                     std::string(message));
  };
}

int SyncLog::Count(std::string_view needle) const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const std::string& line : lines_) {
    if (line.find(needle) != std::string::npos) ++n;
  }
  return n;
}

std::string SyncLog::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string all;
  for (const std::string& line : lines_) all += line + "\n";
  return all;
}

}  // namespace idem::testing
