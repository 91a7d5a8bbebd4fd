// The options of the embedded SQLite store (sqlite_store.h): what
// SqliteStore::Open takes, each field with its URI parameter and its default.
// In a header of its own so that the store's internal parts include the
// options without the store's class.
//
// Thread-safety: plain values.

#ifndef IDEM_SQLITE_STORE_OPTIONS_H_
#define IDEM_SQLITE_STORE_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <string>

namespace idem {

// SQLite's PRAGMA synchronous, in WAL mode (see Durability in sqlite_store.h).
enum class SqliteSynchronous { kOff, kNormal, kFull, kExtra };

struct SqliteStoreOptions {
  // The database file. Created, with any missing parent directories, if it
  // does not exist (unless `create` is false); SQLite keeps `<path>-wal` and
  // `<path>-shm` beside it. A relative path is relative to the working
  // directory. URI: the path of `sqlite:/path/file.db` (or
  // `sqlite:relative/file.db`). Required.
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
  // default of 2 MiB. A bigger cache serves replays of a larger set of
  // records from memory, but makes every write transaction slower once the
  // table is large: raise it only for a read-mostly workload. Reader
  // connections (Inspect) keep SQLite's default.
  // At most kMaxCacheMb (1 TiB). URI parameter `cache_mb`, 0..1048576.
  // Default: 0 (SQLite's 2 MiB).
  std::size_t cache_mb = 0;
  static constexpr std::size_t kMaxCacheMb = 1 << 20;

  // Whether Open may create the file (and its directories), idem's table
  // and index, switch a new file to WAL mode, and migrate an older schema.
  // false opens only an idem store that exists at kSchemaVersion: a missing
  // file, one without idem's table (an empty file, another application's
  // database) or one that needs migrating is kUnavailable naming what is
  // missing, and is left byte for byte as it was (idemctl opens every store
  // so). URI parameter `create` (true/false).
  // Default: true.
  bool create = true;
};

}  // namespace idem

#endif  // IDEM_SQLITE_STORE_OPTIONS_H_
