// Schema versions of the PostgreSQL store.
//
// A table `idem_schema_versions (table_name, version)` in the same schema
// (search_path) holds one row per idem table. Opening a store reads the
// table's version first; only when the table is not there at the newest
// does it run, in one transaction under pg_advisory_xact_lock (so that two
// instances starting at once on a fresh database wait for each other
// instead of both creating the table): create the version table if
// missing, read the table's version again, and apply the steps from there
// to the newest. A table with a newer version
// than this build knows is refused; so is an existing table of that name
// that has no version row (it is not ours).

#include "postgres_schema.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "postgres_sql.h"

namespace idem::postgres_internal {
namespace {

// Schema steps: kSchemaSteps[v] takes a table from version v to v + 1.
// `%t` is the quoted table name, `%i` the quoted index name.
const std::vector<std::vector<std::string>>& SchemaSteps() {
  static const std::vector<std::vector<std::string>> kSteps = {
      // 0 -> 1: the columns SQL needs to decide a claim, a completion and a
      // purge (times in ns since the Unix epoch), and the whole record in
      // the record codec's layout.
      {
          "CREATE TABLE %t ("
          "id bytea PRIMARY KEY, "
          "state smallint NOT NULL, "
          "fingerprint bytea NOT NULL, "
          "token bytea NOT NULL, "
          "locked_until bigint NOT NULL, "
          "expires_at bigint NOT NULL, "
          "takeover boolean NOT NULL, "
          "record bytea NOT NULL)",
          "CREATE INDEX %i ON %t (expires_at)",
      },
  };
  return kSteps;
}

std::string Substitute(std::string sql, const std::string& table,
                       const std::string& index) {
  for (auto [key, value] :
       {std::pair<std::string_view, const std::string*>{"%t", &table},
        {"%i", &index}}) {
    for (std::size_t at = sql.find(key); at != std::string::npos;
         at = sql.find(key, at + value->size())) {
      sql.replace(at, key.size(), *value);
    }
  }
  return sql;
}

// A version this build does not know.
Error NewerVersion(const std::string& prefix, int version) {
  return Error(ErrorCode::kInvalidArgument,
               prefix + "schema version " + std::to_string(version) +
                   " is newer than this build knows (" +
                   std::to_string(SchemaSteps().size()) + ")");
}

// The table exists without a version row.
Error NotOurs(const std::string& prefix) {
  return Error(ErrorCode::kInvalidArgument,
               prefix +
                   "the table exists but is not an idem table (no row in "
                   "idem_schema_versions); choose another with table=");
}

// The steps inside the transaction.
Status Migrate(Connection& c, const std::string& table,
               const std::string& prefix) {
  auto run = [&](const std::string& sql,
                 const std::vector<std::string>& params = {}) {
    return c.RunText(sql, params, "schema");
  };
  const std::string quoted = Quote(table);
  IDEM_RETURN_IF_ERROR(run("SELECT pg_advisory_xact_lock(" +
                           std::to_string(kSchemaLockKey) + ")"));
  IDEM_RETURN_IF_ERROR(
      run("CREATE TABLE IF NOT EXISTS idem_schema_versions ("
          "table_name text PRIMARY KEY, version integer NOT NULL)"));
  IDEM_ASSIGN_OR_RETURN(
      const PgResult found,
      run("SELECT version FROM idem_schema_versions WHERE table_name = $1",
          {table}));
  int version = 0;
  if (PQntuples(found.get()) == 1) {
    version = std::atoi(PQgetvalue(found.get(), 0, 0));
  } else {
    IDEM_ASSIGN_OR_RETURN(const PgResult exists,
                          run("SELECT to_regclass($1) IS NOT NULL", {quoted}));
    if (std::string_view(PQgetvalue(exists.get(), 0, 0)) == "t") {
      return tl::unexpected(NotOurs(prefix));
    }
  }
  const auto& steps = SchemaSteps();
  if (version < 0 || version > static_cast<int>(steps.size())) {
    return tl::unexpected(NewerVersion(prefix, version));
  }
  if (version == static_cast<int>(steps.size())) return {};
  const std::string index = Quote(table + "_expires_at");
  for (std::size_t v = static_cast<std::size_t>(version); v < steps.size();
       ++v) {
    for (const std::string& sql : steps[v]) {
      IDEM_RETURN_IF_ERROR(run(Substitute(sql, quoted, index)));
    }
  }
  IDEM_RETURN_IF_ERROR(
      run("INSERT INTO idem_schema_versions (table_name, version) "
          "VALUES ($1, $2::integer) ON CONFLICT (table_name) "
          "DO UPDATE SET version = excluded.version",
          {table, std::to_string(steps.size())}));
  return {};
}

}  // namespace

Status CheckExisting(Connection& c, const std::string& table,
                     const std::string& prefix) {
  auto run = [&](const std::string& sql,
                 const std::vector<std::string>& params) {
    return c.RunText(sql, params, "check schema");
  };
  auto missing = [&](const std::string& what) {
    return MakeError(ErrorCode::kUnavailable,
                     prefix + what +
                         " (create=false: nothing is created or migrated; "
                         "check table= and the database, or open it once "
                         "with the application)");
  };
  IDEM_ASSIGN_OR_RETURN(const PgResult found,
                        run("SELECT to_regclass($1) IS NOT NULL, "
                            "to_regclass('idem_schema_versions') IS NOT NULL",
                            {Quote(table)}));
  const bool table_exists =
      std::string_view(PQgetvalue(found.get(), 0, 0)) == "t";
  const bool versions_exist =
      std::string_view(PQgetvalue(found.get(), 0, 1)) == "t";
  if (!versions_exist) {
    if (table_exists) return tl::unexpected(NotOurs(prefix));
    return missing("no table " + Quote(table) +
                   " and no idem_schema_versions: this database holds no "
                   "idem store");
  }
  IDEM_ASSIGN_OR_RETURN(
      const PgResult version_row,
      run("SELECT version FROM idem_schema_versions WHERE table_name = $1",
          {table}));
  if (PQntuples(version_row.get()) != 1) {
    if (table_exists) return tl::unexpected(NotOurs(prefix));
    return missing("no table " + Quote(table) + " (and no version row)");
  }
  const int version = std::atoi(PQgetvalue(version_row.get(), 0, 0));
  const int newest = static_cast<int>(SchemaSteps().size());
  if (version > newest) return tl::unexpected(NewerVersion(prefix, version));
  if (!table_exists) {
    return missing("no table " + Quote(table) +
                   " although idem_schema_versions has its row");
  }
  if (version < newest) {
    return missing("the table is at schema version " + std::to_string(version) +
                   " and needs migrating to " + std::to_string(newest));
  }
  return {};
}

Status CreateOrMigrate(Connection& c, const std::string& table,
                       const std::string& prefix) {
  // Up to date: nothing to lock for. Any other answer (missing, older,
  // foreign, newer, a failed read) is decided again under the lock, which
  // is authoritative: a migration another instance has not committed yet
  // reads as older here.
  if (CheckExisting(c, table, prefix)) return {};
  IDEM_RETURN_IF_ERROR(c.RunText("BEGIN", {}, "schema"));
  if (Status s = Migrate(c, table, prefix); !s) {
    // A broken connection is closed anyway; otherwise leave it clean.
    if (!c.broken()) (void)c.RunText("ROLLBACK", {}, "schema");
    return s;
  }
  IDEM_RETURN_IF_ERROR(c.RunText("COMMIT", {}, "schema"));
  return {};
}

}  // namespace idem::postgres_internal
