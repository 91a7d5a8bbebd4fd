// SqliteTransaction: the transaction type of sql::RunInTransaction
// (idem/sql_transaction.h) for the SQLite store, in one of two forms.
//
// On the store's writer (SqliteTransaction tx(store)): the transaction runs
// on the connection the store makes its own writes with.
//
//   idem::SqliteTransaction tx(store);
//   auto response = idem::sql::RunInTransaction(tx, claim, [&](auto& tx) {
//     ... sqlite3_exec(tx.db(), "INSERT INTO transfers ...") ...
//     return idem::Response{201, {}, body};
//   });
//
// On a connection of the application's own (SqliteTransaction tx(store,
// db)), to the store's file.
//
// Which one: SQLite lets one transaction write to a file at a time, so the
// store's writes (every claim, every classic completion) and the
// application's write transactions take turns either way. On the writer
// they take turns on the store's mutex and the record is completed with the
// writer's prepared statements and warm page cache; on a connection of its
// own, the application's transaction and the store's writer meet in
// SQLite's file lock, where the one that waits sleeps in its busy handler
// (1 ms and more), and each commit empties the other connection's page
// cache. Use the writer form for short write transactions in the process
// that opened the store; a connection of your own when the transaction must
// run on a connection you configure (attached databases for reading, your
// own pragmas, hooks or functions), or for long transactions that should
// not keep the store's other writes of this process waiting on its mutex.
//
// The writer form's contract:
//  - Begin waits until no other thread writes with the store or holds its
//    writer (at most the store's busy_timeout while another transaction
//    holds it; then kUnavailable naming busy_timeout), first commits the
//    store writes queued by then, then runs BEGIN IMMEDIATE on the writer's
//    connection (waiting up to busy_timeout for other processes' write
//    locks, as every store write does). From then until Commit or Rollback
//    the calling thread holds the writer: db() is its connection.
//  - Meanwhile every write of this store (Claim, Complete, Release, Revoke,
//    ExtendLock, a purge batch) from other threads queues and waits; one
//    still waiting busy_timeout after it was made fails with kUnavailable
//    ("the store's writer was held by an application transaction for more
//    than busy_timeout=... ms"), having written nothing. When the
//    transaction ends, the queued writes commit together. Inspect and Stats
//    read on their own connections and do not wait. Keep the transaction
//    short: it is every claim's wait.
//  - A store write from the thread that holds the writer (another Guard
//    call, RunOnce, a second SqliteTransaction on the writer) fails at once
//    with kInvalidArgument instead of waiting for itself; make such calls
//    before Begin or after Commit/Rollback. End the transaction on the
//    thread that began it: a store write made from that thread while
//    another thread ends it is not recognized and waits (bounded, as
//    above).
//  - The application uses db() only between Begin and Commit/Rollback, on
//    the thread running the transaction, and leaves the connection as it
//    found it: every statement it prepares on db() is finalized before
//    Commit or Rollback (a statement left over rolls the transaction back:
//    Commit fails with kInvalidArgument; the store then drops that
//    connection, which SQLite frees once the statement is finalized, and
//    opens another); it never closes the connection, ends the transaction
//    itself (COMMIT, ROLLBACK), changes the connection's settings (PRAGMAs,
//    busy handler, hooks, ATTACH, TEMP objects) or keeps db() afterwards.
//  - An error that leaves the connection unusable (a failed ROLLBACK) makes
//    the store close it; its next write opens another. A process that dies
//    holding the writer leaves nothing of the transaction: SQLite discards
//    an uncommitted transaction's pages when the file is next opened.
//  - Commits go through the writer's WAL hook: the store's checkpointer
//    sees them as its own. Other processes, and other stores on the file,
//    still meet the transaction in SQLite's file lock (busy_timeout).
//  - Destroying a writer transaction that is still open rolls it back and
//    releases the writer.
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
  // On the store's writer (see above). `store` must outlive the
  // transaction.
  explicit SqliteTransaction(SqliteStore& store)
      : store_(store), on_writer_(true) {}
  // On the application's connection `db` to store.path(), owned by the
  // caller. `store` and `db` must outlive the transaction.
  SqliteTransaction(SqliteStore& store, sqlite3* db) : store_(store), db_(db) {}

  // On the writer: rolls back an open transaction and releases the writer.
  // On the application's connection: leaves it as it is.
  ~SqliteTransaction() {
    if (on_writer_) Rollback();
  }

  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;

  // The connection the transaction runs on: the application's, or on the
  // writer the writer's between Begin and Commit/Rollback (nullptr
  // outside).
  sqlite3* db() const { return db_; }

  // BEGIN IMMEDIATE: takes the file's write lock now, so that nothing can
  // change the record between the completion's read and its write. On the
  // writer, holds the writer first (see above); on the application's
  // connection, waits up to that connection's own busy timeout.
  // Errors: kUnavailable (busy, held beyond busy_timeout, I/O),
  // kInvalidArgument (a transaction is already open; on the writer, also
  // when this thread holds the writer already).
  Status Begin();
  // COMMIT. Errors as the store's (a failed commit leaves no transaction);
  // on the writer also kInvalidArgument for a statement left on db() or a
  // transaction ended on db(), and the writer is released either way.
  Status Commit();
  // ROLLBACK if a transaction is open (on the writer: releases it); never
  // fails.
  void Rollback();
  // Completes the claim's record inside the transaction
  // (SqliteStore::CompleteInTransaction's contract); on the writer with
  // the writer's own statements. Errors also kInvalidArgument when no
  // transaction is open.
  Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                         const Response& stored);

 private:
  SqliteStore& store_;
  // The application's connection, or the writer's while it is held.
  sqlite3* db_ = nullptr;
  const bool on_writer_ = false;
};

}  // namespace idem

#endif  // IDEM_SQLITE_TRANSACTION_H_
