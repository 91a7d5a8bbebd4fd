// The PostgreSQL store's schema: creating its table and migrating it to
// PostgresStore::kSchemaVersion, or only checking that it is there.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_SCHEMA_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_SCHEMA_H_

#include <string>

#include "idem/error.h"
#include "postgres_connection.h"

namespace idem::postgres_internal {

// Creates `table` (unquoted, ValidTableName) or brings it to the version
// this build knows, in one transaction on `c`; errors begin with `prefix`.
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
