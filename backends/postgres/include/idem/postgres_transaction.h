// PostgresTransaction: the transaction type of sql::RunInTransaction
// (idem/sql_transaction.h) for the PostgreSQL store, in one of two forms.
//
// On a connection the store lends from its pool (PostgresTransaction
// tx(store)): the transaction runs on one of the connections the store
// makes its own calls with, from Begin to Commit or Rollback.
//
//   idem::PostgresTransaction tx(store);
//   auto response = idem::sql::RunInTransaction(tx, claim, [&](auto& tx) {
//     ... PQexecParams(tx.conn(), "INSERT INTO transfers ...") ...
//     return idem::Response{201, {}, body};
//   });
//
// On the application's own libpq connection to the store's database
// (PostgresTransaction tx(store, conn)).
//
// Which one: on a lent connection the record is completed with the
// statement the store prepared on that connection, as its own Complete is;
// on the application's connection the completion is parsed and planned on
// every call (the store cannot prepare statements on a connection it does
// not own), which costs the server more CPU than the application's whole
// INSERT in a short transaction. Use the lent form for the application's
// short transactions on the store's database; a connection of your own
// when the transaction needs session settings of its own (a role, a
// search_path, prepared statements, LISTEN, temporary tables), or should
// not count against the store's pool, or runs longer than the store's
// statement_timeout allows.
//
// The lent form's contract:
//  - Begin waits for a free pool connection as every store call does (up
//    to acquire_timeout; then kUnavailable, "no free connection within
//    acquire_timeout=... ms (pool=N); K lent to open
//    PostgresTransaction(store) transactions"), then runs BEGIN on it. From
//    then until Commit or Rollback the connection counts against the
//    store's `pool`: claims, completions and renewals share the rest.
//    Nothing in the transaction waits for a second pool connection (the
//    completion runs on the lent one), so transactions cannot deadlock on
//    the pool; but a store call made from inside the work (a claim, a
//    Guard::Run, a RunOnce) needs another, and waits up to acquire_timeout
//    when every connection is lent. Make such calls before Begin or after
//    Commit/Rollback, and size `pool` for the transactions open at once
//    plus the store calls made meanwhile (docs/GUIDE.md, "Exactly once").
//  - conn() is that connection, in the transaction, between Begin and
//    Commit/Rollback (nullptr outside), for the thread running the
//    transaction. It is in libpq's non-blocking mode, which PQexec and
//    PQexecParams ignore (they block as usual).
//  - It carries the store's server settings, which apply to the
//    application's statements too: statement_timeout and lock_timeout are
//    the store's statement_timeout (a statement or lock wait beyond it
//    fails, SQLSTATE 57014 or 55P03, and the transaction with it), and
//    idle_in_transaction_session_timeout is statement_timeout + kClientGrace
//    (a pause that long between two statements of the transaction makes
//    the server end the session: the transaction is rolled back and the
//    connection closed). SET LOCAL changes them for one transaction.
//  - The application leaves the session as it found it: only SET LOCAL,
//    never SET or RESET (nor set_config(..., false)), no PREPARE,
//    DEALLOCATE or DISCARD, no LISTEN, no temporary table that outlives
//    the transaction (ON COMMIT DROP does not), no COMMIT or ROLLBACK of
//    its own, no change of libpq's modes (non-blocking,
//    pipeline), and never PQfinish. Every result is read before Commit or
//    Rollback. The store checks what it can when the transaction ends: a
//    connection broken, with a command still in flight or results unread,
//    with its transaction ended by the application, or out of non-blocking
//    or in pipeline mode is closed (the server then rolls back what is
//    open) and Commit fails (kUnavailable for a broken connection,
//    kInvalidArgument otherwise); a failed transaction is rolled back and
//    its connection kept. A statement of the store's that the application
//    deallocated fails the one call that needs it (kInternal, SQLSTATE
//    26000: inside the transaction, the completion, which rolls back) and
//    that connection is closed. A SET without LOCAL is not seen: it stays
//    on the pooled connection for whatever uses it next.
//  - The store's statements name its table with the schema found at Open,
//    so a SET LOCAL search_path does not redirect them.
//  - Destroying a lent transaction that is still open rolls it back and
//    returns the connection (or closes it, as above).
//
// Thread-safety: one thread at a time, like the connection.

#ifndef IDEM_POSTGRES_TRANSACTION_H_
#define IDEM_POSTGRES_TRANSACTION_H_

#include <memory>
#include <string_view>

#include "idem/error.h"
#include "idem/guard.h"
#include "idem/postgres_store.h"
#include "idem/response.h"
#include "idem/sql_transaction.h"

namespace idem {

class PostgresTransaction {
 public:
  // On a connection the store lends from its pool (see above). `store` must
  // outlive the transaction.
  explicit PostgresTransaction(PostgresStore& store);
  // On the application's connection `conn` (a blocking-mode connection to
  // the store's database, owned by the caller). `store` and `conn` must
  // outlive the transaction.
  PostgresTransaction(PostgresStore& store, PGconn* conn);

  // Lent: rolls back an open transaction and gives the connection back.
  // The application's connection: leaves it as it is.
  ~PostgresTransaction();

  PostgresTransaction(const PostgresTransaction&) = delete;
  PostgresTransaction& operator=(const PostgresTransaction&) = delete;

  // The connection the transaction runs on: the application's, or the lent
  // one between Begin and Commit/Rollback (nullptr outside).
  PGconn* conn() const { return conn_; }

  // BEGIN (READ COMMITTED unless the session says otherwise). Lent: a pool
  // connection first (see above). Errors: kInvalidArgument when a
  // transaction is already open, kUnavailable for a broken connection and,
  // lent, for no free connection within acquire_timeout.
  Status Begin();
  // COMMIT. Errors: kUnavailable (the connection broke: the outcome is
  // unknown), kInternal (the transaction had failed and was rolled back;
  // or COMMIT failed, e.g. a deferred constraint, by its SQLSTATE), and,
  // lent, kInvalidArgument when no transaction is open or the application
  // left the connection in a state it must not (see above). Lent, the
  // connection goes back to the pool, or is closed, either way.
  Status Commit();
  // ROLLBACK if a transaction is open (lent: the connection back to the
  // pool, or closed); never fails.
  void Rollback();
  // PostgresStore::CompleteInTransaction with the claim's id and token;
  // lent, with the store's prepared statements, and kInvalidArgument when
  // no transaction is open.
  Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                         const Response& stored);

 private:
  tl::unexpected<Error> NotOpen(std::string_view op) const;
  Status EndLent(bool commit);

  PostgresStore& store_;
  // The application's connection, or the lent one while it is lent.
  PGconn* conn_ = nullptr;
  // The open lent transaction's connection.
  std::unique_ptr<PostgresStore::Lent> lent_;
  const bool lends_ = false;
};

}  // namespace idem

#endif  // IDEM_POSTGRES_TRANSACTION_H_
