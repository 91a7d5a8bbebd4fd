// PostgresTransaction: the transaction type of sql::RunInTransaction
// (idem/sql_transaction.h) for the PostgreSQL store, on the application's
// own libpq connection to the store's database.
//
//   idem::PostgresTransaction tx(store, conn);
//   auto response = idem::sql::RunInTransaction(tx, claim, [&](auto& tx) {
//     ... PQexecParams(tx.conn(), "INSERT INTO transfers ...") ...
//     return idem::Response{201, {}, body};
//   });
//
// Thread-safety: one thread at a time, like the connection.

#ifndef IDEM_POSTGRES_TRANSACTION_H_
#define IDEM_POSTGRES_TRANSACTION_H_

#include "idem/error.h"
#include "idem/guard.h"
#include "idem/postgres_store.h"
#include "idem/response.h"
#include "idem/sql_transaction.h"

namespace idem {

class PostgresTransaction {
 public:
  // `store` and `conn` (a blocking-mode connection to the store's database,
  // owned by the caller) must outlive the transaction.
  PostgresTransaction(PostgresStore& store, PGconn* conn)
      : store_(store), conn_(conn) {}

  PGconn* conn() const { return conn_; }

  // BEGIN (READ COMMITTED unless the session says otherwise). Errors:
  // kInvalidArgument when a transaction is already open, kUnavailable for a
  // broken connection.
  Status Begin();
  // COMMIT. Errors: kUnavailable (the connection broke: the outcome is
  // unknown), kInternal (the transaction had failed and was rolled back).
  Status Commit();
  // ROLLBACK if a transaction is open; never fails.
  void Rollback();
  // PostgresStore::CompleteInTransaction with the claim's id and token.
  Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                         const Response& stored) {
    return store_.CompleteInTransaction(conn_, claim.record_id(), claim.token(),
                                        stored);
  }

 private:
  PostgresStore& store_;
  PGconn* conn_;
};

}  // namespace idem

#endif  // IDEM_POSTGRES_TRANSACTION_H_
