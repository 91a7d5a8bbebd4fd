// The embedded RocksDB store: `rocksdb:/path/dir?sync=false` (SEMANTICS.md,
// "Stores, chosen by URI").
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
//    may lose the writes of the last moments (whatever the kernel had not
//    written back yet, typically up to ~30 s).
//  - sync = true: every write is fsync'ed before the call returns, so a
//    completed record also survives power loss, at the cost of one fsync per
//    Claim, Complete and Release.
// Closing the store (the destructor) flushes the column family to a table
// file, so the next open does not have to replay the log.
//
// Processes: one process owns a RocksDB directory (Info():
// shared_across_processes = false). RocksDB takes a LOCK file in it; opening
// a directory that another process (or another store in this process) holds
// fails with kUnavailable naming the path. For several processes on one
// file, use the SQLite store.
//
// Atomicity: every read-modify-write of a record (Claim, Complete, Release,
// the deletes of PurgeExpired) holds one of 1024 in-process mutexes, chosen
// by the record id, around a plain Get and Put/Delete. Since one process owns
// the directory, in-process locks give the same guarantee as RocksDB's
// TransactionDB with GetForUpdate, which was built too and measured on the
// same workload (Claim+Complete of fresh ids, sync=false, 2-core VM; real
// time per pair as Google Benchmark reports it): striped locks 27 us with 1
// thread and 45 us with 8, TransactionDB 33.5 us and 46-51 us (details in
// docs/STORES.md). The transaction's lock manager, per-transaction
// allocation and commit bookkeeping cost ~20% with one thread and buy
// nothing a mutex does not, so the mutexes stayed.
// Contention on one id serializes on its mutex, as it would on the
// transaction lock.
//
// Expiry: every read checks expires_at against the caller's `now`, so an
// expired record is absent at once. Expired records are removed from disk by
// a compaction filter (it reads expires_at straight from the value header,
// without decoding the rest, and compares it with StoreOptions::clock) and by
// PurgeExpired. RocksDB compacts on its own as data grows; Compact() forces a
// full compaction.
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
#include "idem/store.h"
#include "idem/store_uri.h"
#include "idem/types.h"

namespace idem {

struct RocksdbStoreOptions {
  // The database directory. Created, with any missing parent directories, if
  // it does not exist. A relative path is relative to the working directory.
  // URI: the path of `rocksdb:/path/dir` (or `rocksdb:relative/dir`).
  // Required.
  std::string path;

  // Whether every write is fsync'ed before the call returns (see the
  // durability notes above: false survives process crashes, true also power
  // loss). URI parameter `sync` (true/false/1/0/yes/no/on/off).
  // Default: false.
  bool sync = false;
};

class RocksdbStore final : public Store {
 public:
  // The column family that holds the records.
  static constexpr char kColumnFamily[] = "idempotency";

  // Opens (creating if needed) the database at options.path. The
  // compaction filter takes time from store_options.clock (SystemClock when
  // null).
  // Errors: kInvalidArgument when options.path is empty or names something
  // that is not a directory; kUnavailable naming the path when the directory
  // is held by another process or another open store (RocksDB's LOCK file),
  // or cannot be created or read; kDataLoss when RocksDB reports the
  // database corrupt; kInternal otherwise.
  static Result<std::unique_ptr<RocksdbStore>> Open(
      const RocksdbStoreOptions& options,
      const StoreOptions& store_options = {});

  // Opens the store a parsed `rocksdb:` URI names, as OpenStore does: the
  // path is the URI's path, parameter `sync` is RocksdbStoreOptions::sync.
  // Errors: kInvalidArgument naming the URI when the scheme is not
  // "rocksdb", when it has a host, user or port, when the path is empty,
  // when `sync` is not a boolean or another parameter is present; otherwise
  // what Open returns.
  static Result<std::unique_ptr<Store>> OpenFromUri(
      StoreUri& uri, const StoreOptions& options);

  // Flushes the record column family to disk and closes the database,
  // releasing the directory's LOCK. Errors while flushing are ignored: the
  // write-ahead log still holds every write and is replayed on the next
  // open. Must not run concurrently with any other call on this store.
  ~RocksdbStore() override;

  RocksdbStore(const RocksdbStore&) = delete;
  RocksdbStore& operator=(const RocksdbStore&) = delete;

  // The claim table of store.h under the id's lock: one Get, and one Put
  // when the result is kAcquired. Errors: kInvalidArgument when ttl or
  // lock_timeout is not positive; kDataLoss when the stored value does not
  // decode; kUnavailable or kInternal when RocksDB fails (nothing was
  // written then, or the write's outcome is unknown only if RocksDB itself
  // says so).
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override;

  // Under the id's lock: if the record is in_progress with `token`, writes it
  // back completed with `response` (same expires_at) and returns true;
  // otherwise returns false and writes nothing. Expiry is not checked: a
  // holder may complete its claim until another claim replaces the record.
  // Errors: kDataLoss when the stored value does not decode; kUnavailable or
  // kInternal when RocksDB fails.
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) override;

  // Under the id's lock: deletes the record if it is in_progress with
  // `token`; returns whether it did. Errors as for Complete.
  Result<bool> Release(const RecordId& id, const Token& token) override;

  // The record of `id` unless absent or expired at `now`. One Get, no lock:
  // the value read is one complete version of the record. Errors: kDataLoss
  // when the stored value does not decode; kUnavailable or kInternal when
  // RocksDB fails.
  Result<std::optional<Record>> Inspect(const RecordId& id,
                                        TimePoint now) override;

  // Deletes up to `limit` records with expires_at <= now, in batches of at
  // most 32 (one WriteBatch each, written with the ids' locks held so that
  // a record claimed again meanwhile is never deleted). Scans the column
  // family in key order from where the previous call stopped, wrapping
  // around once, so the cost is proportional to the records examined, not
  // only to those deleted; the compaction filter is what normally keeps the
  // files small. Calls are serialized with each other. Values whose header
  // does not read are skipped. Errors: kUnavailable or kInternal when RocksDB
  // fails; records deleted by earlier batches of the call stay deleted.
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) override;

  // {"rocksdb", durable = true, shared_across_processes = false}.
  StoreInfo Info() const override;

  // Compacts the whole record column family now, so that the compaction
  // filter drops every record expired as of the store's clock. Blocks until
  // done; safe alongside other calls. For operators and tests.
  // Errors: kUnavailable or kInternal when RocksDB fails.
  Status Compact();

  // The database directory, as given in the options.
  const std::string& path() const;

 private:
  struct Impl;
  explicit RocksdbStore(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace idem

#endif  // IDEM_ROCKSDB_STORE_H_
