// The PostgreSQL store's schema: creating its table and migrating it to
// PostgresStore::kSchemaVersion, or only checking that it is there.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_SCHEMA_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_SCHEMA_H_

#include <cstdint>
#include <string>

#include "idem/error.h"
#include "postgres_connection.h"

namespace idem::postgres_internal {

// The advisory lock every idem schema change in a database takes for its
// transaction, whatever the table (pg_advisory_xact_lock).
inline constexpr std::int64_t kSchemaLockKey = 0x6964656d5f736368;  // idem_sch

// Brings `table` (unquoted, ValidTableName) to the version this build
// knows; errors begin with `prefix`. A table already there at that version
// (every start but a database's first, or a new build's) is found by
// reads alone, CheckExisting's, with no transaction and no lock: instances
// starting at once never queue behind one another's opens, which under a
// short statement_timeout could time an open out. Otherwise it is created
// or migrated in one transaction on `c`, under kSchemaLockKey.
// Errors: kInvalidArgument when the table exists without a row in
// idem_schema_versions or with a newer version; what the statements return.
Status CreateOrMigrate(Connection& c, const std::string& table,
                       const std::string& prefix);

// For PostgresStoreOptions::create = false: checks, with reads only (no
// transaction, no lock), that `table` exists at this build's version.
// Errors: kUnavailable naming what is missing (idem_schema_versions, the
// table, its version row) or saying that it needs migrating;
// kInvalidArgument as CreateOrMigrate's for a foreign or newer table; what
// the statements return.
Status CheckExisting(Connection& c, const std::string& table,
                     const std::string& prefix);

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_SCHEMA_H_
