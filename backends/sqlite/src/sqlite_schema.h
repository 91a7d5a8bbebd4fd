// The SQLite store's schema: switching the file to WAL mode and creating or
// migrating the table to SqliteStore::kSchemaVersion, on open (or only
// checking it, with create=false).

#ifndef IDEM_BACKENDS_SQLITE_SQLITE_SCHEMA_H_
#define IDEM_BACKENDS_SQLITE_SQLITE_SCHEMA_H_

#include "idem/error.h"
#include "sqlite_connection.h"

namespace idem::sqlite_internal {

// With options().create false, first checks (reads only) that the file
// holds an idem store at this version: kUnavailable naming what is missing
// otherwise, before anything is written. Then switches the file to WAL
// mode, and creates or migrates the schema in one write transaction:
// several processes opening a new file at once serialize here, and the
// later ones find the schema in place; a crash mid-migration leaves the old
// version. Errors: kUnavailable when WAL mode cannot be set; kInvalidArgument
// for a schema version this build does not know; SQLite's errors otherwise
// (SqlError).
Status PrepareSchema(Connection& conn);

}  // namespace idem::sqlite_internal

#endif  // IDEM_BACKENDS_SQLITE_SQLITE_SCHEMA_H_
