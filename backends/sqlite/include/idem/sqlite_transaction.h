// SqliteTransaction: the transaction type of sql::RunInTransaction
// (idem/sql_transaction.h) for the SQLite store, on the application's own
// connection to the store's file.
//
//   idem::SqliteTransaction tx(store, db);
//   auto response = idem::sql::RunInTransaction(tx, claim, [&](auto& tx) {
//     ... sqlite3_exec(tx.db(), "INSERT INTO transfers ...") ...
//     return idem::Response{201, {}, body};
//   });
//
// Thread-safety: one thread at a time, like the connection.

#ifndef IDEM_SQLITE_TRANSACTION_H_
#define IDEM_SQLITE_TRANSACTION_H_

#include "idem/error.h"
#include "idem/guard.h"
#include "idem/response.h"
#include "idem/sql_transaction.h"
#include "idem/sqlite_store.h"

namespace idem {

class SqliteTransaction {
 public:
  // `store` and `db` (a connection to store.path(), owned by the caller)
  // must outlive the transaction.
  SqliteTransaction(SqliteStore& store, sqlite3* db) : store_(store), db_(db) {}

  sqlite3* db() const { return db_; }

  // BEGIN IMMEDIATE: takes the file's write lock now (waiting up to the
  // connection's own busy timeout), so that nothing can change the record
  // between the completion's read and its write. Errors: kUnavailable
  // (busy, I/O), kInvalidArgument (a transaction is already open).
  Status Begin();
  // COMMIT. Errors as the store's (a failed commit leaves no transaction).
  Status Commit();
  // ROLLBACK if a transaction is open; never fails.
  void Rollback();
  // SqliteStore::CompleteInTransaction with the claim's id and token.
  Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                         const Response& stored) {
    return store_.CompleteInTransaction(db_, claim.record_id(), claim.token(),
                                        stored);
  }

 private:
  SqliteStore& store_;
  sqlite3* db_;
};

}  // namespace idem

#endif  // IDEM_SQLITE_TRANSACTION_H_
