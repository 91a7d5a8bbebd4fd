// Where the PostgreSQL store's in-transaction completion writes
// (postgres_transaction.cc): found once at Open on the store's own
// connection.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_TRANSACTION_TARGET_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_TRANSACTION_TARGET_H_

#include <string>

#include "idem/error.h"
#include "idem/postgres_store.h"
#include "postgres_connection.h"

namespace idem::postgres_internal {

// The database the store is connected to and its table qualified with the
// schema it lives in (both quoted), so that a caller's connection with
// another search_path still writes the store's table. The prefix is left
// empty. Errors: as Connection::RunText; kInternal when the table is gone.
Result<PostgresStore::TransactionTarget> FindTransactionTarget(
    Connection& conn, const std::string& table);

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_TRANSACTION_TARGET_H_
