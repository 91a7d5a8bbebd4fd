// The options of the embedded RocksDB store (rocksdb_store.h): what
// RocksdbStore::Open takes, each field with its URI parameter and its default.
// In a header of its own so that the store's internal parts include the
// options without the store's class.
//
// Thread-safety: plain values.

#ifndef IDEM_ROCKSDB_STORE_OPTIONS_H_
#define IDEM_ROCKSDB_STORE_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <string>

namespace idem {

struct RocksdbStoreOptions {
  // The database directory. Created, with any missing parent directories, if
  // it does not exist (unless `create` is false). A relative path is relative
  // to the working directory. URI: the path of `rocksdb:/path/dir` (or
  // `rocksdb:relative/dir`). Required.
  std::string path;

  // Whether every write is fsync'ed before the call returns (see the
  // durability notes in rocksdb_store.h: false survives process crashes, true
  // also power loss). URI parameter `sync` (true/false/1/0/yes/no/on/off).
  // Default: false.
  bool sync = false;

  // The LRU block cache of the record column family, in MiB (2^20 bytes),
  // shared by all of its table files. 0 means no block cache at all: every
  // read of a record that is not in the memtable reads its data block from
  // the table file (from the OS page cache at best). Raise it to the working
  // set of replayed records (docs/STORES.md). At most kMaxBlockCacheMb. URI
  // parameter `block_cache_mb` (0 to 1048576). Default: 64.
  std::size_t block_cache_mb = kDefaultBlockCacheMb;

  // Whether Open may create the directory, the database and its column
  // family. false opens only an existing idem RocksDB database: a missing
  // directory, one without a database (no CURRENT file: an empty
  // directory) or without the `idempotency` column family is kUnavailable
  // naming what is missing, and no file is written into it (idemctl opens
  // every store so). URI parameter `create` (true/false).
  // Default: true.
  bool create = true;

  static constexpr std::size_t kDefaultBlockCacheMb = 64;
  // 1 TiB: anything larger is a typo, not a cache.
  static constexpr std::size_t kMaxBlockCacheMb = 1048576;
};

}  // namespace idem

#endif  // IDEM_ROCKSDB_STORE_OPTIONS_H_
