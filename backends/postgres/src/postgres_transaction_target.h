// What the PostgreSQL store shares with its transactions
// (postgres_transaction.cc): where the in-transaction completion writes,
// found once at Open on the store's own connection, and the pool
// connection a PostgresTransaction(store) holds.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_TRANSACTION_TARGET_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_TRANSACTION_TARGET_H_

#include <string>
#include <string_view>
#include <utility>

#include "idem/error.h"
#include "idem/postgres_store.h"
#include "postgres_connection.h"
#include "postgres_pool.h"

namespace idem {

// A connection of the store's pool, lent to one PostgresTransaction(store)
// from its Begin to its Commit or Rollback. Ending the lease (GiveBack)
// returns the connection to the pool when it is idle and healthy, and
// closes it otherwise.
struct PostgresStore::Lent {
  explicit Lent(postgres_internal::Pool::Lease lease)
      : lease(std::move(lease)) {}
  postgres_internal::Pool::Lease lease;
};

}  // namespace idem

namespace idem::postgres_internal {

// Whether `conn` is inside an open transaction the store may complete a
// record in. Errors: kUnavailable for a broken connection; kInvalidArgument
// when it has no transaction open, its transaction failed, or a command is
// in progress on it. `prefix` and `op` begin the message.
Status CheckTransactionOpen(PGconn* conn, const std::string& prefix,
                            std::string_view op);

// The database the store is connected to and its table qualified with the
// schema it lives in (both quoted), so that a caller's connection with
// another search_path still writes the store's table. The prefix is left
// empty. Errors: as Connection::RunText; kInternal when the table is gone.
Result<PostgresStore::TransactionTarget> FindTransactionTarget(
    Connection& conn, const std::string& table);

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_TRANSACTION_TARGET_H_
