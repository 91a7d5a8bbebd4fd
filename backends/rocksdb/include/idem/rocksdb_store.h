// The embedded RocksDB store: `rocksdb:/path/dir?sync=false&block_cache_mb=64`
// (docs/SEMANTICS.md, "Stores, chosen by URI").
//
// Records live in the directory's `idempotency` column family, keyed by the
// 32-byte record id, each value one record in the record codec's layout
// (record_codec.h). Nothing else is written: no client key, scope or
// request body ever reaches the files.
//
// Durability (Info(): durable = true). Every write goes to RocksDB's
// write-ahead log before the call returns:
//  - sync = false (default): the WAL is written to the operating system's page
//    cache, not forced to disk. A process crash (kill -9, abort, OOM kill)
//    loses nothing that a call reported written: the kernel still has it and
//    RocksDB replays the WAL on the next open. A power loss or kernel crash
//    may lose the writes the kernel had not written back yet.
//  - sync = true: every write is fsync'ed before the call returns, so a
//    completed record also survives power loss, at the cost of one fsync per
//    Claim, Complete and Release.
// Closing the store (the destructor) flushes the column family to a table
// file, so the next open does not have to replay the log.
//
// Memory: the record column family reads its table files through an LRU
// block cache of RocksdbStoreOptions::block_cache_mb (default 64 MiB, 0 =
// none), so a replay of a recently read record is served from memory instead
// of from a table file. The cache grows only as blocks are read; its size is
// an upper bound, not an allocation. Index and filter blocks are not in it
// (RocksDB's default): each open table file holds its own in memory.
//
// Processes: one process owns a RocksDB directory (Info():
// shared_across_processes = false). RocksDB takes a LOCK file in it; opening
// a directory that another process (or another store in this process) holds
// fails with kUnavailable naming the path. For several processes on one
// file, use the SQLite store.
//
// Atomicity: every read-modify-write of a record (Claim, Complete, Release,
// Revoke, the deletes of PurgeExpired) holds one of 1024 in-process mutexes,
// chosen by the record id, around a plain Get and Put/Delete; one process
// owns the directory, so that is atomic per id. Calls on one id serialize.
//
// Expiry: every read checks expires_at against the caller's `now`, so an
// expired record is absent at once. Expired records are removed from disk by
// a compaction filter (judging expiry by StoreOptions::clock) and by
// PurgeExpired. RocksDB compacts only as data is written, so a store that
// receives no more writes keeps its expired records until PurgeExpired
// deletes them: OpenStore's sweeper (sweeper.h) does, every 60 s by default.
// Compact() forces a full compaction.
//
// Corruption: a value that does not decode (bad checksum, truncated, unknown
// version) is reported as kDataLoss by Claim, Complete, Release and Inspect,
// never treated as a missing record. The compaction filter and PurgeExpired
// judge expiry by the header alone: a value whose header does not read is
// never deleted by them, while an expired record is deleted even if its
// body is damaged (it has no use left).
//
// Errors: RocksDB statuses map to Corruption -> kDataLoss; IOError, Busy,
// TimedOut, TryAgain -> kUnavailable; anything else -> kInternal. Messages
// name the directory. Exceptions from RocksDB or the standard library are
// caught at this boundary (std::bad_alloc -> kResourceExhausted, others ->
// kInternal).
//
// A full disk: a write that fails (ENOSPC on the WAL) returns kUnavailable
// (the Guard answers 503), and so does every write until the store has
// recovered: it retries DB::Resume() itself, before a write, at most once a
// second, so it recovers within about a second of the next call once space
// is back. Reads, and so replays, go on meanwhile; nothing that a call
// reported written is lost, and a full disk never aborts the process. A
// fatal background error (not a full disk) needs a reopen.
//
// Blocking (Info().calls_may_block = true): a call waits for no network
// and, without sync, for no fsync, but it does wait inside RocksDB: for the
// write group (a write joins the one in flight and waits for its leader),
// for the id's stripe mutex, for a table-file read of an old record and for
// a write stall. Made inline on an adapter's I/O threads those waits cost
// more requests/s and p99 on a 2-core machine under load than the hop to a
// pool saved (docs/BENCHMARKS.md, "Where a fresh-key request's time goes").
// So, without sync, claims and completions are asynchronous
// (Info().async_calls): ClaimAsync and CompleteAsync are made one after
// another on the store's own thread (idem/store/store_thread.h), which
// never waits for another caller inside RocksDB, and answered there; the
// adapters hand them over from their I/O threads and keep their pool for
// the other calls. The calls that thread takes in one batch write in one
// WriteBatch (one append to the log) and are answered after it is
// written, each id locked from its read to that write; a batch that
// cannot be written answers each of its writing calls with the error
// (kUnavailable for a full disk), none of them true. A ClaimAsync first reads
// the record on the caller's thread, from memory only (the memtables and the
// block cache, never a table file, no lock): when the record there blocks the
// claim (a replay, a mismatch, a claim in progress) it is answered at once, on
// that thread, inside the call; every other claim goes to the store's thread.
// With sync they are made inside the call (async_calls false), so that
// concurrent callers on the pool share one WAL fsync. Adapters may still
// choose inline calls (StoreCalls::kInline, idem-demo --store-calls
// inline) or the pool for everything (kPool).
//
// Thread-safety: every method may be called concurrently from any number of
// threads, except the destructor, which must not run concurrently with any
// other call on the same store.

#ifndef IDEM_ROCKSDB_STORE_H_
#define IDEM_ROCKSDB_STORE_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/rocksdb_store_options.h"
#include "idem/store.h"
#include "idem/store/store_boundary.h"
#include "idem/store/store_thread.h"
#include "idem/store_uri.h"
#include "idem/types.h"

namespace idem {

class RocksdbStore final : public StoreBoundary {
 public:
  // The column family that holds the records.
  static constexpr char kColumnFamily[] = "idempotency";

  // Opens (creating if needed, unless options.create is false) the database
  // at options.path. The compaction filter takes time from
  // store_options.clock (SystemClock when null).
  // Errors: kInvalidArgument when options.path is empty or names something
  // that is not a directory, or a directory that holds other files but no
  // RocksDB database (no CURRENT file; e.g. `rocksdb:/`): a missing or empty
  // directory, or one holding only the files of an interrupted first open
  // (or a lost+found), is fine; the message names the path and one of the
  // files. Also when options.block_cache_mb is above
  // RocksdbStoreOptions::kMaxBlockCacheMb; kUnavailable naming the path when
  // the directory is held by another process or another open store (RocksDB's
  // LOCK file), or cannot be created or read, or (create = false) holds no
  // idem database; kDataLoss when RocksDB reports the database corrupt;
  // kInternal otherwise.
  static Result<std::unique_ptr<RocksdbStore>> Open(
      const RocksdbStoreOptions& options,
      const StoreOptions& store_options = {});

  // Opens the store a parsed `rocksdb:` URI names, as OpenStore does: the
  // path is the URI's path, parameters `sync`, `block_cache_mb` and
  // `create` are RocksdbStoreOptions::sync, ::block_cache_mb and ::create.
  // Errors: kInvalidArgument naming the URI when the scheme is not
  // "rocksdb", when it has a host, user or port, when the path is empty,
  // when `sync` is not a boolean, when `block_cache_mb` is not an integer
  // from 0 to 1048576 (the message names the parameter) or another
  // parameter is present; otherwise what Open returns (its kInvalidArgument
  // then names the URI too).
  static Result<std::unique_ptr<Store>> OpenFromUri(
      StoreUri& uri, const StoreOptions& options);

  // Flushes the record column family to disk and closes the database,
  // releasing the directory's LOCK. Errors while flushing are ignored: the
  // write-ahead log still holds every write and is replayed on the next
  // open. Must not run concurrently with any other call on this store.
  ~RocksdbStore() override;

  RocksdbStore(const RocksdbStore&) = delete;
  RocksdbStore& operator=(const RocksdbStore&) = delete;

  // {"rocksdb", durable = true, shared_across_processes = false,
  // async_calls = !sync}.
  StoreInfo Info() const override;

  // Compacts the whole record column family now, so that the compaction
  // filter drops every record expired as of the store's clock. Blocks until
  // done; safe alongside other calls. For operators and tests.
  // Errors: kUnavailable or kInternal when RocksDB fails.
  Status Compact();

  // The database directory, as given in the options.
  const std::string& path() const;

 protected:
  // The Store operations (store.h), each called through StoreBoundary
  // (idem/store/store_boundary.h: argument checks, exceptions as errors).
  // The claim table of store.h under the id's lock: one Get, and one Put
  // when the result is kAcquired. Errors: kInvalidArgument when ttl or
  // lock_timeout is not positive; kDataLoss when the stored value does not
  // decode; kUnavailable or kInternal when RocksDB fails (nothing was
  // written then, or the write's outcome is unknown only if RocksDB itself
  // says so).
  Result<ClaimResult> DoClaim(const RecordId& id, const Fingerprint& fp,
                              TimePoint now, Duration ttl,
                              Duration lock_timeout) override;

  // Under the id's lock: if the record is in_progress with `token`, writes it
  // back completed with `response` (same expires_at) and returns true;
  // otherwise returns false and writes nothing. Expiry is not checked: a
  // holder may complete its claim until another claim replaces the record.
  // Errors: kDataLoss when the stored value does not decode; kUnavailable or
  // kInternal when RocksDB fails.
  Result<bool> DoComplete(const RecordId& id, const Token& token,
                          const Response& response) override;

  // Without `sync` (Info().async_calls): DoClaim and DoComplete made on the
  // store's own thread (idem/store/store_thread.h), one after another, their
  // writes gathered per batch of that thread, and answered there once the
  // batch is written; a claim that a record in memory blocks (a replay, a
  // mismatch, a claim in progress) is answered inside the call instead. With
  // `sync`: made inside the call, so that concurrent callers keep sharing one
  // WAL fsync in RocksDB's write group.
  void DoClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                    Duration ttl, Duration lock_timeout,
                    StoreCallback<ClaimResult> done) override;
  void DoCompleteAsync(const RecordId& id, const Token& token,
                       std::shared_ptr<const Response> response,
                       StoreCallback<bool> done) override;

  // Under the id's lock: deletes the record if it is in_progress with
  // `token`; returns whether it did. Errors as for Complete.
  Result<bool> DoRelease(const RecordId& id, const Token& token) override;

  // Under the id's lock: deletes the value of `id` whatever it holds, even
  // one that does not decode; returns whether there was one. Errors:
  // kUnavailable or kInternal when RocksDB fails.
  Result<bool> DoRevoke(const RecordId& id) override;
  // A read-modify-write under the id's mutex like Complete: one Put of the
  // record with its new locked_until. kDataLoss when the value does not
  // decode.
  Result<bool> DoExtendLock(const RecordId& id, const Token& token,
                            TimePoint now, Duration lock_timeout) override;
  // One pass over every value (an iterator's snapshot, no lock held; the
  // block cache is not filled). A value whose header says expired counts
  // as expired; a live one that does not decode as damaged.
  Result<std::optional<StoreStats>> DoStats(TimePoint now) override;

  // The record of `id` unless absent or expired at `now`. One Get, no lock:
  // the value read is one complete version of the record. Errors: kDataLoss
  // when the stored value does not decode; kUnavailable or kInternal when
  // RocksDB fails.
  Result<std::optional<Record>> DoInspect(const RecordId& id,
                                          TimePoint now) override;

  // Deletes up to `limit` records with expires_at <= now, in batches of at
  // most 32 (one WriteBatch each, written with the ids' locks held so that
  // a record claimed again meanwhile is never deleted). Scans the column
  // family in key order from where the previous call stopped, wrapping
  // around once, so the cost is proportional to the records examined, not
  // only to those deleted; the compaction filter is what normally keeps the
  // files small. One call examines at most max(100,000, 100 * limit) keys:
  // it may then return fewer than `limit` while expired records remain
  // further on, and the next call resumes there (a full cycle over a large
  // store takes several calls). Calls are serialized with each other. Values
  // whose header does not read are skipped. Errors: kUnavailable or kInternal
  // when RocksDB fails; records deleted by earlier batches of the call stay
  // deleted.
  Result<std::size_t> DoPurgeExpired(TimePoint now, std::size_t limit) override;

 private:
  struct Impl;
  explicit RocksdbStore(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  // Makes ClaimAsync and CompleteAsync (without `sync`); joined first by
  // the destructor, before the database closes.
  StoreThread calls_;
};

}  // namespace idem

#endif  // IDEM_ROCKSDB_STORE_H_
