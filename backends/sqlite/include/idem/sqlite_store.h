// The embedded SQLite store:
// `sqlite:/path/file.db?synchronous=normal&busy_timeout_ms=5000&cache_mb=0`
// (docs/SEMANTICS.md, "Stores, chosen by URI"). Records live in one table of
// one database file in WAL mode; no client key, scope or request body is
// ever written. A file of an older schema version is migrated on open, one
// of a newer version is refused.
//
// Durability (Info(): durable = true), by the `synchronous` option:
//  - normal (default): a commit is written to the WAL file before the call
//    returns, and the WAL is fsync'ed only at checkpoints. A process crash
//    (kill -9) loses nothing; a power loss may roll back the last commits.
//  - full / extra: every commit fsyncs the WAL: completed records also
//    survive power loss.
//  - off: no fsync at all; a power loss may also corrupt the file.
// The store's connections use SQLite's default VFS through a thin layer
// ("idem-wal-gather") that writes a commit's WAL frames with one write
// instead of two per frame; a commit is in the WAL file before it returns,
// as with the default VFS, and other processes may open the file with any
// VFS.
//
// Processes: several processes (and several stores in one process) may
// share one file (Info(): shared_across_processes = true): SQLite's file
// locks serialize writers, and every decision is made inside one write
// transaction. A writer waits up to busy_timeout for the lock; beyond that
// the call fails with kUnavailable. The file must be on a local file system
// (WAL needs shared memory between the processes). Writes of one store are
// committed together when they arrive at once (group commit): a call
// returns only after the transaction holding it committed, and a call that
// fails writes nothing and does not fail the others. An application
// transaction may hold the store's writer (SqliteTransaction(store),
// sqlite_transaction.h): the store's writes from other threads then wait
// for it, at most busy_timeout (then kUnavailable), and a write from the
// thread that holds it fails at once with kInvalidArgument.
//
// Asynchronous calls (Info(): async_calls = true): ClaimAsync and
// CompleteAsync queue their write on the store's writer and return without
// waiting for it (only for the writer's short lock); the write joins the
// same group commits as the synchronous calls, so many calls in flight
// share one transaction. `done` is called on the thread that ran the batch:
// the writer's own thread (started by the first asynchronous call; a store
// used only synchronously has none, and may be used in a child after
// fork()), or a synchronous call's thread that led that batch. `done` must
// not block, throw, or call this store synchronously. Same bounds as the
// synchronous calls: while a SqliteTransaction holds the writer, a queued
// call fails with kUnavailable once busy_timeout passed since it was made
// (nothing written); one made from the holding thread simply queues behind
// the transaction. The destructor runs the calls still queued and calls
// every `done` before it returns (a call made by a `done` meanwhile fails
// with kUnavailable "store closing").
//
// Errors: SQLITE_BUSY and SQLITE_LOCKED (after busy_timeout), I/O errors,
// a full disk, a read-only or unopenable file -> kUnavailable;
// SQLITE_CORRUPT, SQLITE_NOTADB and records that do not decode or disagree
// with their columns -> kDataLoss; out of memory -> kResourceExhausted;
// anything else -> kInternal. Messages name the file. Exceptions are caught
// at this boundary.
//
// Thread-safety: every method may be called concurrently from any number of
// threads, except the destructor, which must not run concurrently with any
// other call on the same store.

#ifndef IDEM_SQLITE_STORE_H_
#define IDEM_SQLITE_STORE_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/sql_transaction.h"
#include "idem/sqlite_store_options.h"
#include "idem/store.h"
#include "idem/store/store_boundary.h"
#include "idem/store_uri.h"
#include "idem/types.h"

struct sqlite3;

namespace idem {

class SqliteStore final : public StoreBoundary {
 public:
  // The schema version this build creates (PRAGMA user_version).
  static constexpr int kSchemaVersion = 3;
  // How often a claim whose upsert met a live record, and whose follow-up
  // SELECT found it gone (released, revoked or purged by another process
  // in between), tries again before it answers kInProgress.
  static constexpr int kClaimAttempts = 64;

  // Opens (creating if needed, unless options.create is false) the database
  // at options.path, switches it to WAL mode and creates or migrates the
  // schema. Starts no sweeper (OpenStore adds the common one, sweeper.h);
  // store_options is accepted for uniformity.
  // Errors: kInvalidArgument when the path is empty or ":memory:", a
  // directory, or the file has a schema version newer than kSchemaVersion;
  // kUnavailable when the file or its directory cannot be created or
  // opened, when (create = false) it is missing, holds no idem table or
  // needs migrating, when it cannot be switched to WAL mode, or when another
  // connection holds the write lock beyond busy_timeout while the schema is
  // created; kDataLoss when the file is corrupt or not a SQLite database;
  // kInternal otherwise.
  static Result<std::unique_ptr<SqliteStore>> Open(
      const SqliteStoreOptions& options,
      const StoreOptions& store_options = {});

  // Opens the store a parsed `sqlite:` URI names, as OpenStore does.
  // Parameters: synchronous, busy_timeout_ms, cache_mb, create (OpenStore
  // takes sweep_interval_s, the sweeper's, before it calls this).
  // Errors: kInvalidArgument naming the URI when the scheme is not "sqlite",
  // when it has a host, user or port, when the path is empty, when a
  // parameter is malformed or out of range, or when another parameter is
  // present; otherwise what Open returns.
  static Result<std::unique_ptr<Store>> OpenFromUri(
      StoreUri& uri, const StoreOptions& options);

  // Runs the asynchronous calls still queued (calling their `done`), stops
  // the writer's and the checkpointer's threads and closes every
  // connection. Must not run concurrently with any other call on this
  // store.
  ~SqliteStore() override;

  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  // {"sqlite", durable = true, shared_across_processes = true,
  // async_calls = true}.
  StoreInfo Info() const override;

  // The database file, as given in the options.
  const std::string& path() const;

  // Exactly once (idem/sql_transaction.h; sqlite_transaction.h has the
  // helper): completes the record of `id` with `stored` inside the
  // transaction open on the caller's connection `db`, if and only if it is
  // in_progress with `token` (checked in the UPDATE itself), keeping its
  // expires_at. kStored: written in the caller's transaction, visible when
  // it commits. kClaimLost: nothing written; roll back. `stored` is stored
  // as given: pass ClaimHandle::StorableResponse. Begin the transaction
  // with BEGIN IMMEDIATE (a deferred one that read before a concurrent
  // takeover fails with kUnavailable, SQLITE_BUSY_SNAPSHOT). While it is
  // open, this store's own writes (every claim) wait for it, up to
  // busy_timeout: keep it short. `db` may be the connection of a
  // SqliteTransaction on this store's writer that this thread holds (its
  // db()): the writer's own prepared statements are used then. For a claim
  // this store made and remembers, the UPDATE is all (no read first).
  // Errors: kInvalidArgument when `db` is null,
  // has no transaction open, or its main database is not this store's file
  // (the record must be in the same file as the business rows; an ATTACHed
  // database is not atomic with the main one in WAL mode); otherwise as the
  // store's other calls, on `db`. The caller must not use `db` on another
  // thread meanwhile.
  Result<TransactionCompletion> CompleteInTransaction(sqlite3* db,
                                                      const RecordId& id,
                                                      const Token& token,
                                                      const Response& stored);

 protected:
  // The Store operations, as store.h states them, through StoreBoundary
  // (idem/store/store_boundary.h: argument checks, exceptions as errors).
  // Writes (all but Inspect and Stats) go through the store's one writer
  // connection, each in one write transaction; Inspect reads on a connection of
  // its own and takes no write lock. Errors as above; a write that fails wrote
  // nothing. While a SqliteTransaction holds the writer, a write waits for it
  // at most busy_timeout from the call (then kUnavailable: "the store's writer
  // was held by an application transaction ...", nothing written), and one made
  // from the thread holding it fails at once with kInvalidArgument.
  //  - Claim: kInvalidArgument when ttl or lock_timeout is not positive; a
  //    claim that loses kClaimAttempts races answers kInProgress with
  //    locked_until = now.
  //  - Complete: one UPDATE for a claim this store made and still remembers
  //    (idem/store/claim_memo.h: the last ~16384 claims), a SELECT first for
  //    any other (made by another store on the file, say).
  //  - Revoke deletes the row even when its record does not decode.
  //  - PurgeExpired deletes in transactions of at most 1000 rows (so other
  //    writers wait for one batch at most), rows whose columns say expired
  //    even if their record is damaged; batches committed before an error
  //    stay deleted.
  Result<ClaimResult> DoClaim(const RecordId& id, const Fingerprint& fp,
                              TimePoint now, Duration ttl,
                              Duration lock_timeout) override;
  Result<bool> DoComplete(const RecordId& id, const Token& token,
                          const Response& response) override;
  // Claim and Complete through the writer's queue without waiting (see
  // above): the same writes, and the same errors through `done`.
  void DoClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                    Duration ttl, Duration lock_timeout,
                    StoreCallback<ClaimResult> done) override;
  void DoCompleteAsync(const RecordId& id, const Token& token,
                       std::shared_ptr<const Response> response,
                       StoreCallback<bool> done) override;
  Result<bool> DoRelease(const RecordId& id, const Token& token) override;
  Result<bool> DoRevoke(const RecordId& id) override;
  // In the writer's transaction: a SELECT of the row (kDataLoss when it
  // does not decode), then one UPDATE of its locked_until and record.
  Result<bool> DoExtendLock(const RecordId& id, const Token& token,
                            TimePoint now, Duration lock_timeout) override;
  // One SELECT count(*) ... GROUP BY over the columns, on a reader
  // connection (a snapshot of the file; the writer is not held). Counts by
  // the columns: a damaged record is counted by them, never as damaged.
  Result<std::optional<StoreStats>> DoStats(TimePoint now) override;
  Result<std::optional<Record>> DoInspect(const RecordId& id,
                                          TimePoint now) override;
  Result<std::size_t> DoPurgeExpired(TimePoint now, std::size_t limit) override;

 private:
  friend class SqliteTransaction;
  // Tests' access to hooks and the writer's queue
  // (src/sqlite_store_test_peer.h).
  friend class SqliteStoreTestPeer;
  class Impl;
  explicit SqliteStore(std::unique_ptr<Impl> impl);

  // SqliteTransaction on the store's writer (sqlite_transaction.h): holds
  // the writer and opens its transaction (the connection), completes a
  // record on it, ends it with COMMIT or ROLLBACK and releases the writer.
  Result<sqlite3*> HoldWriter();
  Result<TransactionCompletion> CompleteOnHeldWriter(const RecordId& id,
                                                     const Token& token,
                                                     const Response& stored);
  Status ReleaseWriter(bool commit);
  // Whether this thread holds the writer in a SqliteTransaction and `db` is
  // its connection.
  bool HoldsWriterOn(sqlite3* db);
  // The in_progress record the claim of `token` on `id` wrote, if this
  // store made it and still remembers it (idem/store/claim_memo.h), so that a
  // completion needs no read; locked_until may be older than the row's.
  std::optional<Record> RememberedClaim(const RecordId& id, const Token& token);

  std::unique_ptr<Impl> impl_;
};

}  // namespace idem

#endif  // IDEM_SQLITE_STORE_H_
