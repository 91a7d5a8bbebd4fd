// The PostgreSQL store:
// `postgresql://user:password@host:5432/db?table=idempotency_keys&pool=8`
// (SEMANTICS.md, "Stores, chosen by URI"). `postgres://` is accepted too.
// Many server instances on many hosts share one table; the database makes
// every decision, so the instances need no coordination of their own.
//
// Schema (created on open, see "Schema versions" below; <t> is `table`):
//
//   CREATE TABLE "<t>" (
//     id           bytea PRIMARY KEY,  -- the 32-byte record id
//     state        smallint NOT NULL,  -- 1 in_progress, 2 completed
//     fingerprint  bytea NOT NULL,     -- 32 bytes
//     token        bytea NOT NULL,     -- 16 bytes
//     locked_until bigint NOT NULL,    -- ns since the Unix epoch
//     expires_at   bigint NOT NULL,    -- ns since the Unix epoch
//     takeover     boolean NOT NULL,   -- this claim took a timed-out lock over
//     record       bytea NOT NULL      -- EncodeRecord(the record)
//   );
//   CREATE INDEX "<t>_expires_at" ON "<t>" (expires_at);
//
// As in the SQLite store, the columns are what SQL needs to decide a claim,
// a completion and a purge inside the database, and `record` is the whole
// record in the record codec's layout (record_codec.h), checksummed: it is
// what every read returns. A row whose record does not decode, or disagrees
// with its columns, is kDataLoss, never a miss. Times are the `now` the
// caller passes (the Guard's Clock), never the server's now(): every
// instance must use the system clock (clock.h), and tests can use a
// ManualClock. No client key, scope or request body is ever written.
//
// Claim of a free id is one statement, one round trip, and the cheapest
// write the database has for it:
//
//   INSERT ... VALUES (<a fresh in_progress record>)
//   ON CONFLICT (id) DO NOTHING
//
// A unique index serializes the inserts of one id in the database (a second
// inserter waits for the first one's commit, then sees its row): of N
// concurrent claims of an absent id exactly one inserts ("INSERT 0 1").
// When a record stood in the way, a second statement, a plain SELECT of the
// row, reads it, from which the outcome follows (kInProgress, kCompleted or
// kMismatch). Being a new statement, that SELECT has a fresh snapshot (READ
// COMMITTED), so it also sees a row that a concurrent claim committed after
// the insert started (the losers of the race above). When the row is
// claimable (expired, or in progress with the same fingerprint and its lock
// timed out), a third statement takes it over if it still is:
//
//   INSERT ... VALUES (<the fresh record>)
//   ON CONFLICT (id) DO UPDATE SET <the fresh record>
//     WHERE <expired> OR <in progress, same fingerprint, lock timed out>
//   RETURNING takeover
//
// whose WHERE decides atomically, so two claims that both saw the record
// claimable cannot both take it over. If the row went away in between
// (released, revoked, purged) or changed (completed, taken over by another
// claim), the claim starts again, at most kClaimAttempts times in all; a
// claim that keeps losing such races reports kInProgress, as every store
// does (store.h: another request is plainly working on the key;
// kUnavailable would make a fail-open Guard run the handler unprotected
// beside it), with locked_until = now.
//
// The trade: first attempts, the bulk of the traffic, cost one round trip
// and the least server work; a replay, in-progress or mismatch costs two
// round trips and a takeover three. Replays and concurrent duplicates are
// client retries, rare against first attempts, and they answer without
// writing; takeovers follow expired records and crashed handlers only.
// Measured (STORES.md, PostgreSQL performance): the server spends 10-13%
// more CPU on the conditional upsert than on the plain insert, even when
// nothing conflicts (the DO UPDATE projection, its filter and RETURNING
// are set up on every execution), which the upsert-first claim of earlier
// versions paid on every first attempt to save the two extra round trips
// of a takeover; a claim that also SELECTs the existing row in the same
// statement (a CTE with UNION ALL) costs ~20% more than the upsert. A claim
// that always wrote the row (DO UPDATE without a WHERE, returning the old
// values) would be one round trip always, but it would turn every replay of
// a completed record into a write and a row lock, so concurrent replays of
// one key would queue on each other.
//
// Complete is one conditional UPDATE ... WHERE id = $1 AND token = $2 AND
// state = 1 that writes the completed record. Encoding that record needs its
// fingerprint, locked_until and expires_at; the store remembers them from
// the claims it made itself (a fixed in-memory table by token, cleared on
// Complete and Release), so the usual Claim-then-Complete on one store is
// one round trip. A token is fresh for every claim, so a row that still has
// it in progress has exactly the fields that claim wrote. A claim made by
// another store instance (or forgotten: the table has kRememberedClaims slots)
// costs a SELECT first. Release is one DELETE with the same condition.
//
// PurgeExpired deletes in batches of kPurgeBatch rows:
//   DELETE FROM "<t>" WHERE id IN (SELECT id FROM "<t>" WHERE expires_at <=
//     $now LIMIT $n FOR UPDATE SKIP LOCKED)
// through the expires_at index; rows that a concurrent claim is taking
// over, or another instance's purge is deleting, are skipped, not waited
// for, so several instances sweeping one table (sweeper.h) never queue on
// each other.
//
// Revoke is one DELETE ... WHERE id = $1, whatever the row holds.
//
// Schema versions: a table `idem_schema_versions (table_name, version)` in
// the same schema (search_path) holds one row per idem table. Open runs,
// in one transaction under pg_advisory_xact_lock (so two instances starting
// at once on a fresh database wait for each other instead of both creating
// the table): create the version table if missing, read the table's
// version, and apply the steps from there to kSchemaVersion. Version 1 is
// the layout above. A table with a newer version than this build knows is
// refused; so is an existing table of that name that has no version row
// (it is not ours).
//
// Connections: a pool of at most `pool` libpq connections, opened lazily
// (the first on Open, to create the schema and fail early), each used by
// one thread at a time, handed over under a mutex, with its statements
// prepared on first use. A call waits up to acquire_timeout for a free
// connection, then fails with kUnavailable.
//
// Timeouts: no call blocks beyond its timeouts. Every statement runs in
// libpq's non-blocking mode, with a client-side deadline of
// statement_timeout + kClientGrace polled on the socket; the server also
// enforces statement_timeout (and lock_timeout, which it includes) and
// idle_in_transaction_session_timeout on the session. Connecting is bounded
// by connect_timeout (libpq's; host name resolution excepted); TCP
// keepalives and tcp_user_timeout make a silently dropped peer visible.
// With the defaults a call waits at most about 5 s for a free connection,
// 5 s to open one, and 7 s per round trip. A call makes one round trip
// usually; a claim that finds a record two, a takeover three, one that
// loses races at most 3 * kClaimAttempts, a Complete of another store's
// claim two, a purge one per batch, and a statement used for the first
// time on a connection is prepared first (one more).
//
// Outages: a connection that fails (the server restarted or shut down, a
// network drop, a client-side timeout) is closed, and the call fails with
// kUnavailable: it is not retried on another connection, since the
// statement may have committed. Later calls open fresh connections lazily;
// an idle pooled connection that the server closed meanwhile (it is
// readable while idle) is replaced before use, so after a server restart
// the first call already succeeds. While the server is unreachable every
// call fails with kUnavailable within the bounds above (connection refused
// is immediate). Completed records are in the database: nothing the store
// keeps in memory is needed to replay them.
//
// Errors: no connection, a broken connection, a client-side timeout,
// SQLSTATE classes 08 (connection), 53 (resources: too many connections,
// disk full), 57 (statement timeout, shutdown) and 40 (serialization,
// deadlock), and 55P03 (lock not available) -> kUnavailable; XX001 and
// XX002 (corrupt data) and records that do not decode -> kDataLoss; out of
// memory -> kResourceExhausted; anything else -> kInternal. Messages name
// the server and table (never the password) and include the SQLSTATE.
// Exceptions are caught at this boundary.
//
// Thread-safety: every method may be called concurrently from any number of
// threads, except the destructor, which must not run concurrently with any
// other call on the same store.

#ifndef IDEM_POSTGRES_STORE_H_
#define IDEM_POSTGRES_STORE_H_

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
  // PostgreSQL's 63). Created if missing. Case-sensitive (it is quoted).
  // URI parameter `table`.
  // Default: "idempotency_keys".
  std::string table = "idempotency_keys";

  // Most connections the store opens at once. URI parameter `pool`, 1..1024.
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

class PostgresStore final : public Store {
 public:
  // The schema version this build creates (idem_schema_versions.version).
  static constexpr int kSchemaVersion = 1;
  // How often a Claim starts again (insert, read, take over) after losing
  // a race before settling for kInProgress.
  static constexpr int kClaimAttempts = 4;
  // Rows per PurgeExpired statement.
  static constexpr std::size_t kPurgeBatch = 1000;
  // Slots of the table of claims whose fields a store remembers for a
  // one-statement Complete (about 100 bytes each, allocated at Open). A
  // claim takes the slot its token maps to, evicting the claim there.
  static constexpr std::size_t kRememberedClaims = 16384;
  // Added to statement_timeout for the client-side deadline, so that the
  // server's own timeout (a clean error) normally fires first.
  static constexpr std::chrono::milliseconds kClientGrace{2000};

  // Connects, creates or migrates the schema (see above) and keeps that
  // connection in the pool. store_options.clock is not used: every time
  // comes from the calls' arguments.
  // Errors: kInvalidArgument when an option is out of range, the table name
  // is not a plain identifier, the table exists without a version row, or
  // has a version newer than kSchemaVersion; kUnavailable when the server
  // cannot be reached within connect_timeout or refuses the connection, or
  // the schema statements time out; kInternal otherwise (e.g. missing
  // privileges).
  static Result<std::unique_ptr<PostgresStore>> Open(
      const PostgresStoreOptions& options,
      const StoreOptions& store_options = {});

  // Opens the store a parsed `postgresql:` or `postgres:` URI names, as
  // OpenStore does. Parameters: table, pool, acquire_timeout_ms,
  // connect_timeout_s, statement_timeout_ms, sslmode.
  // Errors: kInvalidArgument naming the URI (password redacted) when the
  // scheme is neither, when the database name is missing or has a '/', when
  // a parameter is malformed or out of range, or when another parameter is
  // present; otherwise what Open returns, with the URI in the message.
  static Result<std::unique_ptr<Store>> OpenFromUri(
      StoreUri& uri, const StoreOptions& options);

  // Closes every connection. Must not run concurrently with any other call
  // on this store.
  ~PostgresStore() override;

  PostgresStore(const PostgresStore&) = delete;
  PostgresStore& operator=(const PostgresStore&) = delete;

  // The claim table of store.h (see above for how).
  // Errors: kInvalidArgument when ttl or lock_timeout is not positive;
  // kDataLoss when the stored record does not decode; kUnavailable as
  // described above; kInternal otherwise. On kUnavailable the claim may or
  // may not have been written (the connection broke after sending it): a
  // retry then gets kInProgress until the lock times out.
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override;

  // If the record is in_progress with `token`, stores it completed with
  // `response` (same expires_at) and returns true; otherwise false and
  // nothing changes. Errors as for Claim.
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) override;

  // Deletes the record if it is in_progress with `token`; returns whether
  // it did. One DELETE; errors as for Claim.
  Result<bool> Release(const RecordId& id, const Token& token) override;

  // Deletes the row of `id` whatever its state, even when its record does
  // not decode; returns whether there was one. One DELETE; errors as for
  // Claim.
  Result<bool> Revoke(const RecordId& id) override;

  // The record of `id` unless absent or expired at `now`; one SELECT.
  // Errors: kDataLoss when the stored record does not decode or disagrees
  // with its columns; otherwise as for Claim.
  Result<std::optional<Record>> Inspect(const RecordId& id,
                                        TimePoint now) override;

  // Deletes up to `limit` records with expires_at <= now, in statements of
  // at most kPurgeBatch rows (each its own transaction). Rows whose columns
  // say expired are deleted even if their record is damaged. Errors as for
  // Claim; batches committed before an error stay deleted.
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) override;

  // {"postgres", durable = true, shared_across_processes = true}.
  StoreInfo Info() const override;

  // The table, as given in the options.
  const std::string& table() const;

  // Test hook (store.h): called inside Claim, on the calling thread, at each
  // ClaimAttemptPoint; every statement before it has committed, so the hook
  // may change the row through a connection of its own. Set it before any
  // claim runs; never in production.
  void SetClaimAttemptHookForTesting(ClaimAttemptHook hook);

 private:
  class Impl;
  explicit PostgresStore(std::unique_ptr<Impl> impl);
  // Open, naming the store `display` in messages (the redacted URI).
  static Result<std::unique_ptr<PostgresStore>> OpenNamed(
      const PostgresStoreOptions& options, std::string display);

  std::unique_ptr<Impl> impl_;
};

}  // namespace idem

#endif  // IDEM_POSTGRES_STORE_H_
