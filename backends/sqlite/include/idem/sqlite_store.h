// The embedded SQLite store:
// `sqlite:/path/file.db?synchronous=normal&busy_timeout_ms=5000`
// (SEMANTICS.md, "Stores, chosen by URI").
//
// Records live in one table of one database file, in WAL mode:
//
//   CREATE TABLE idem_records (
//     id           BLOB PRIMARY KEY NOT NULL,  -- the 32-byte record id
//     state        INTEGER NOT NULL,           -- 1 in_progress, 2 completed
//     fingerprint  BLOB NOT NULL,              -- 32 bytes
//     token        BLOB NOT NULL,              -- 16 bytes
//     locked_until INTEGER NOT NULL,           -- ns since the Unix epoch
//     expires_at   INTEGER NOT NULL,           -- ns since the Unix epoch
//     takeovers    INTEGER NOT NULL DEFAULT 0, -- of this claim's lock
//     record       BLOB NOT NULL               -- EncodeRecord(the record)
//   ) WITHOUT ROWID;
//   CREATE INDEX idem_records_expires_at ON idem_records (expires_at);
//
// The columns are what SQL needs to decide a claim, a completion and a purge
// in the database; `record` is the whole record in the record codec's layout
// (record_codec.h), checksummed, and is what every read returns. A row whose
// record does not decode, or disagrees with its columns, is kDataLoss.
// `takeovers` counts how often the current claim's lock was taken over since
// the key was last claimed afresh: it is how the claim statement's RETURNING
// tells a takeover from a new claim. No client key, scope or request body is
// ever written.
//
// Schema versions (PRAGMA user_version), created or migrated on open inside
// one write transaction, so a crash mid-migration leaves the old version:
//   1: `idempotency (id BLOB PRIMARY KEY, record BLOB NOT NULL)`: the record
//      blob only. A claim had to read and decode it in a transaction, and
//      PurgeExpired had to decode every row.
//   2: the layout above. Migrating from 1 decodes each record into the new
//      columns; a record that does not decode is carried over unchanged
//      (never purged, still kDataLoss on read) rather than dropped.
// A file with a newer version than this build knows is refused.
//
// Durability (Info(): durable = true), by the `synchronous` option:
//  - normal (default): a commit is written to the WAL file before the call
//    returns, and the WAL is fsync'ed only at checkpoints. A process crash
//    (kill -9) loses nothing; a power loss may roll back the last commits.
//  - full / extra: every commit fsyncs the WAL: completed records also
//    survive power loss.
//  - off: no fsync at all; a power loss may also corrupt the file.
//
// Processes: several processes (and several stores in one process) may
// share one file (Info(): shared_across_processes = true): SQLite's file
// locks serialize writers, and every decision is made inside one write
// transaction. A writer waits up to busy_timeout for the lock; beyond that
// the call fails with kUnavailable. The file must be on a local file system
// (WAL needs shared memory between the processes).
//
// Claim is one statement:
//   INSERT ... ON CONFLICT (id) DO UPDATE SET ... WHERE <expired, or in
//   progress with the same fingerprint and its lock timed out>
//   RETURNING takeovers
// which inserts or takes over inside the writer's transaction (below); when
// it returns no row (a live record stood in the way), one SELECT in the same
// transaction reads the record that decides the outcome (kInProgress,
// kCompleted or kMismatch). The
// alternative, BEGIN IMMEDIATE; SELECT; decide in C++; INSERT OR REPLACE;
// COMMIT, was built too and measured on the same workload (Claim+Complete of
// fresh ids, synchronous=normal, files on tmpfs so that checkpoint fsyncs do
// not drown the difference, 2-core VM): 51-56 us per pair against 51-57 us
// with 1 thread, 55-59 us against 56-62 us with 8. A tie, so the single
// statement stayed: it holds the write lock, which every process sharing
// the file waits for, for one statement instead of a four-step transaction.
//
// Complete is a SELECT and then one conditional UPDATE ... WHERE id = ? AND
// token = ? AND state = 1: a token is fresh for every claim, so if the
// UPDATE still finds it in_progress with that token, the row is the one the
// SELECT read. Release is one DELETE with the same condition.
//
// Writes (Claim, Complete, Release, PurgeExpired): one connection per store
// makes them all, one call or one transaction at a time. A call that finds
// the writer idle runs at once, in autocommit mode; one that finds it busy
// queues, and whoever finds it idle next runs every queued call (up to 64)
// in one BEGIN IMMEDIATE ... COMMIT, each inside its own savepoint (group
// commit): a call returns only after the transaction holding it committed,
// so durability is as above, and a call that fails writes nothing and does
// not fail the others (an error that ends the whole transaction, or a failed
// COMMIT, fails them all). Why one writer: SQLite lets one transaction write
// at a time anyway, and a second connection of this process that wants to
// write meets the first in SQLite's busy handler, which sleeps (1 ms and
// more); here it waits on a mutex instead, and the writer's page cache stays
// valid between its transactions (another connection's commit would empty
// it). Other processes are still kept out by SQLite's locks, and the writer
// waits for them up to busy_timeout.
//
// Checkpoints: the writer does not copy the WAL into the database file
// itself (that costs two fsyncs inside some unlucky call's commit, with
// every other write waiting). Every 1000 WAL frames it wakes a background
// thread that runs a PASSIVE checkpoint on a connection of its own, which
// waits for nobody; only if the WAL reaches 4000 frames (~16 MiB) does the
// writer checkpoint inline, which bounds the WAL and lets SQLite restart it
// from the beginning. The thread is stopped by the destructor.
//
// Reads (Inspect): a pool of connections in SQLite's multi-thread mode, each
// used by one thread at a time, each with its prepared statements cached; it
// grows to the number of threads reading at once (at most 64 kept idle).
//
// Errors: SQLITE_BUSY and SQLITE_LOCKED (after busy_timeout), I/O errors,
// a full disk, a read-only or unopenable file -> kUnavailable;
// SQLITE_CORRUPT, SQLITE_NOTADB and records that do not decode ->
// kDataLoss; out of memory -> kResourceExhausted; anything else ->
// kInternal. Messages name the file. Exceptions are caught at this
// boundary.
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
#include "idem/store.h"
#include "idem/store_uri.h"
#include "idem/types.h"

namespace idem {

// SQLite's PRAGMA synchronous, in WAL mode (see the durability notes above).
enum class SqliteSynchronous { kOff, kNormal, kFull, kExtra };

struct SqliteStoreOptions {
  // The database file. Created, with any missing parent directories, if it
  // does not exist; SQLite keeps `<path>-wal` and `<path>-shm` beside it. A
  // relative path is relative to the working directory.
  // URI: the path of `sqlite:/path/file.db` (or `sqlite:relative/file.db`).
  // Required.
  std::string path;

  // URI parameter `synchronous` (off, normal, full, extra).
  // Default: kNormal.
  SqliteSynchronous synchronous = SqliteSynchronous::kNormal;

  // How long a write waits for another connection's (or process's) write
  // lock before failing with kUnavailable. At most kMaxBusyTimeout (1 h).
  // URI parameter `busy_timeout_ms`, 0..3600000.
  // Default: 5 s.
  std::chrono::milliseconds busy_timeout{5000};
  static constexpr std::chrono::milliseconds kMaxBusyTimeout{3'600'000};

  // The page cache of the writer connection, which makes every claim,
  // completion and release, in MiB (PRAGMA cache_size); 0 keeps SQLite's
  // default of 2 MiB. Pages it holds are not read again with pread, so a
  // bigger cache serves replays of a larger set of records from memory. But
  // it makes every write transaction slower once the table is large (perf:
  // the time goes to SQLite 3.40's page cache truncation at the end of each
  // transaction, which walks the cache's hash table). Measured
  // (idem-scale disk, filling 100,000 -> 300,000 records, one thread, 2-core
  // VM): 29.5 s with 2 MiB, 46.1 s with 64 MiB, 61.2 s with 1 GiB; replay
  // p50 at 1,000,000 records 19.4 us with 2 MiB, 16.8 us with 1 GiB. Raise it
  // only for a read-mostly workload. Reader connections (Inspect) keep
  // SQLite's default. URI parameter `cache_mb`, 0..1048576.
  // Default: 0 (SQLite's 2 MiB).
  std::size_t cache_mb = 0;
};

class SqliteStore final : public Store {
 public:
  // The schema version this build creates (PRAGMA user_version).
  static constexpr int kSchemaVersion = 2;
  // How often a claim whose upsert met a live record, and whose follow-up
  // SELECT found it gone (released, revoked or purged by another process
  // in between), tries again before it answers kInProgress.
  static constexpr int kClaimAttempts = 64;

  // Opens (creating if needed) the database at options.path, switches it to
  // WAL mode and creates or migrates the schema. Starts no sweeper (OpenStore
  // adds the common one, sweeper.h); store_options is accepted for
  // uniformity.
  // Errors: kInvalidArgument when the path is empty or ":memory:", a
  // directory, or the file has a schema version newer than kSchemaVersion;
  // kUnavailable when the file or its directory cannot be created or
  // opened, when it cannot be switched to WAL mode, or when another
  // connection holds the write lock beyond busy_timeout while the schema is
  // created; kDataLoss when the file is corrupt or not a SQLite database;
  // kInternal otherwise.
  static Result<std::unique_ptr<SqliteStore>> Open(
      const SqliteStoreOptions& options,
      const StoreOptions& store_options = {});

  // Opens the store a parsed `sqlite:` URI names, as OpenStore does.
  // Parameters: synchronous, busy_timeout_ms, cache_mb (OpenStore takes
  // sweep_interval_s, the sweeper's, before it calls this).
  // Errors: kInvalidArgument naming the URI when the scheme is not "sqlite",
  // when it has a host, user or port, when the path is empty, when a
  // parameter is malformed or out of range, or when another parameter is
  // present; otherwise what Open returns.
  static Result<std::unique_ptr<Store>> OpenFromUri(
      StoreUri& uri, const StoreOptions& options);

  // Stops the checkpointer and closes every connection. Must not run
  // concurrently with any other call on this store.
  ~SqliteStore() override;

  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  // The claim table of store.h in one write transaction (see above). A
  // claim that loses kClaimAttempts races answers kInProgress with
  // locked_until = now (store.h).
  // Errors: kInvalidArgument when ttl or lock_timeout is not positive;
  // kDataLoss when the stored record does not decode; kUnavailable when the
  // write lock was not obtained within busy_timeout, or on I/O errors;
  // kInternal otherwise. On an error nothing was written.
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override;

  // If the record is in_progress with `token`, stores it completed with
  // `response` (same expires_at) and returns true; otherwise returns false
  // and writes nothing. Expiry is not checked: a holder may complete its
  // claim until another claim replaces the record. Errors: kDataLoss when
  // the stored record does not decode; kUnavailable and kInternal as for
  // Claim.
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) override;

  // Deletes the record if it is in_progress with `token`; returns whether it
  // did. One DELETE; errors as for Claim.
  Result<bool> Release(const RecordId& id, const Token& token) override;

  // Deletes the row of `id` whatever its state, even when its record does
  // not decode; returns whether there was one. One DELETE through the
  // writer; errors as for Claim.
  Result<bool> Revoke(const RecordId& id) override;

  // The record of `id` unless absent or expired at `now`; one SELECT, no
  // write lock. Errors: kDataLoss when the stored record does not decode or
  // disagrees with its columns; kUnavailable and kInternal as for Claim.
  Result<std::optional<Record>> Inspect(const RecordId& id,
                                        TimePoint now) override;

  // Deletes up to `limit` records with expires_at <= now, through the
  // expires_at index, in transactions of at most 1000 deletes each (so
  // writers in other processes wait for one batch at most). Records whose
  // columns say expired are deleted even if their blob is damaged. Errors:
  // kUnavailable and kInternal as for Claim; batches committed before the
  // error stay deleted.
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) override;

  // {"sqlite", durable = true, shared_across_processes = true}.
  StoreInfo Info() const override;

  // The database file, as given in the options.
  const std::string& path() const;

  // Test hook (store.h): called inside Claim, on the thread that runs the
  // write, at each ClaimAttemptPoint. Set it before any claim runs; never in
  // production. Between the points no transaction is open in autocommit
  // mode, so the hook may change the row through a connection of its own.
  void SetClaimAttemptHookForTesting(ClaimAttemptHook hook);

 private:
  class Impl;
  explicit SqliteStore(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace idem

#endif  // IDEM_SQLITE_STORE_H_
