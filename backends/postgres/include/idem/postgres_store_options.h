// The options of the PostgreSQL store (postgres_store.h): what
// PostgresStore::Open takes, each field with its URI parameter and its default.
// In a header of its own so that the store's internal parts include the
// options without the store's class.
//
// Thread-safety: plain values.

#ifndef IDEM_POSTGRES_STORE_OPTIONS_H_
#define IDEM_POSTGRES_STORE_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <string>

namespace idem {

// When a PostgreSQL store first connects (PostgresStoreOptions::connect).
enum class PostgresConnect {
  // In Open: Open fails when the server cannot be reached or refuses the
  // table.
  kEager,
  // In the background: Open returns at once, without reaching the server;
  // until the first connection and its table check succeed every call
  // fails with kUnavailable (see PostgresStore::Open).
  kLazy,
};

struct PostgresStoreOptions {
  // Where the server is, as libpq connection parameters. Empty fields are
  // left to libpq's defaults (environment variables PGHOST, PGPORT, PGUSER,
  // PGPASSWORD, ~/.pgpass; a Unix socket when `host` is empty).
  // URI: postgresql://user:password@host:port/dbname.
  std::string host;
  std::string port;
  std::string dbname;
  std::string user;
  std::string password;
  // libpq's sslmode (disable, allow, prefer, require, verify-ca,
  // verify-full); empty leaves libpq's default (prefer). URI parameter
  // `sslmode`.
  std::string sslmode;

  // The records' table: letters, digits and '_', starting with a letter or
  // '_', at most 48 bytes (its index name adds a suffix within
  // PostgreSQL's 63). Created if missing (unless `create` is false).
  // Case-sensitive (it is quoted). URI parameter `table`.
  // Default: "idempotency_keys".
  std::string table = "idempotency_keys";

  // Whether Open may create the table, its index and idem_schema_versions,
  // and migrate an older table. false opens only a table that exists at
  // kSchemaVersion, writing nothing (idemctl opens every store so): a
  // missing table or version row, or an older version, is kUnavailable
  // naming what is missing. URI parameter `create` (true/false).
  // Default: true.
  bool create = true;

  // When the store first connects (PostgresConnect). URI parameter
  // `connect` (eager, lazy).
  // Default: kEager.
  PostgresConnect connect = PostgresConnect::kEager;

  // Most connections the store opens at once, each opened on first need.
  // URI parameter `pool`, 1..1024.
  // Default: 8.
  std::size_t pool_size = 8;

  // How long a call waits for a free pooled connection before failing with
  // kUnavailable. URI parameter `acquire_timeout_ms`, 0..3600000.
  // Default: 5 s.
  std::chrono::milliseconds acquire_timeout{5000};

  // libpq's connect_timeout for opening a connection. URI parameter
  // `connect_timeout_s`, 1..3600 (libpq treats values under 2 s as 2 s).
  // Default: 5 s.
  std::chrono::seconds connect_timeout{5};

  // The server's statement_timeout and lock_timeout for every statement,
  // and (plus kClientGrace) the client-side deadline of each round trip.
  // URI parameter `statement_timeout_ms`, 1..3600000.
  // Default: 5 s.
  std::chrono::milliseconds statement_timeout{5000};
};

}  // namespace idem

#endif  // IDEM_POSTGRES_STORE_OPTIONS_H_
