// The PostgreSQL store:
// `postgresql://user:password@host:5432/db?table=idempotency_keys&pool=8`
// (docs/SEMANTICS.md, "Stores, chosen by URI"); `postgres://` is accepted
// too. Many server instances on many hosts may share one table: the database
// decides every claim, so the instances need no coordination of their own.
//
// Open creates the table `table` (with an index `<table>_expires_at`) and a
// table `idem_schema_versions` in the connection's schema if they are
// missing, and migrates older versions (docs/STORES.md has the layout);
// with `create=false` it only checks that they exist. No
// client key, scope or request body is ever written. Times are the `now`
// the caller passes, never the server's clock: every instance must use the
// system clock (clock.h).
//
// Durability: a call returns after its statement committed (as durable as
// the server's commit is); completed records are in the database, so
// nothing the store keeps in memory is needed to replay them, from any
// instance.
//
// Timeouts: no call blocks beyond them. A call waits up to acquire_timeout
// for a pooled connection, up to connect_timeout to open one, and up to
// statement_timeout + kClientGrace per round trip. A call makes one round
// trip usually: a claim that finds a record two, a takeover three, a claim
// that loses races at most 3 * kClaimAttempts, a Complete of another
// instance's claim two, a purge one per batch, and a statement's first use
// on a connection one more (it is prepared).
//
// Asynchronous calls (Info().async_calls): ClaimAsync and CompleteAsync
// never block the caller. A thread of the store's own sends them in
// batches, a few statements for many calls on one pooled connection
// (backends/postgres/src/postgres_async_calls.h), and answers each after the
// statement that wrote it returned. A call that waited for that thread
// longer than acquire_timeout (statement_timeout + kClientGrace when that
// is 0) fails with kUnavailable, unsent; each statement is bounded as
// above. Every other call is synchronous.
//
// Outages: while the server is unreachable every call fails with
// kUnavailable within the bounds above; a failed call is not retried (its
// statement may have committed). After the server is back the same store
// works again without reopening. With `connect=lazy` the store may also be
// opened while the server is down (Open says how it then behaves).
//
// Errors: kUnavailable for no connection, a broken one, a client-side
// timeout, and SQLSTATE classes 08, 53, 57, 40 and 55P03; kDataLoss for
// SQLSTATE XX001/XX002 and for a row whose record does not decode or
// disagrees with its columns (never a miss); kResourceExhausted when out of
// memory; kInternal otherwise. Messages name the server and table (never the
// password) and the SQLSTATE. No call throws.
//
// Thread-safety: every method may be called concurrently from any number of
// threads, except the destructor.

#ifndef IDEM_POSTGRES_STORE_H_
#define IDEM_POSTGRES_STORE_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/postgres_store_options.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/sql_transaction.h"
#include "idem/store.h"
#include "idem/store/store_boundary.h"
#include "idem/store_uri.h"
#include "idem/types.h"

typedef struct pg_conn PGconn;

namespace idem {

class PostgresStore final : public StoreBoundary {
 public:
  // The schema version this build creates (idem_schema_versions.version).
  static constexpr int kSchemaVersion = 1;
  // How often a Claim starts again after losing a race (the row changed
  // between its statements) before settling for kInProgress.
  static constexpr int kClaimAttempts = 4;
  // Rows per PurgeExpired statement.
  static constexpr std::size_t kPurgeBatch = 1000;
  // Added to statement_timeout for the client-side deadline of a round trip,
  // so that the server's own timeout normally fires first.
  static constexpr std::chrono::milliseconds kClientGrace{2000};

  // Connects, creates or migrates the schema (only checks it when
  // options.create is false) and keeps that connection in the pool.
  // store_options.clock is not used: every time comes from the calls'
  // arguments; store_options.log gets the lazy connection's messages.
  // Errors: kInvalidArgument when an option is out of range, the table name
  // is not a plain identifier, the table exists without a version row, or
  // has a version newer than kSchemaVersion; kUnavailable when the server
  // cannot be reached within connect_timeout or refuses the connection, or
  // the schema statements time out, or (create = false) the table, its
  // version row or idem_schema_versions is missing or the table needs
  // migrating; kInternal otherwise (e.g. missing privileges).
  //
  // With options.connect = kLazy, Open only checks the options (their
  // errors as above) and returns without reaching the server; a background
  // thread then connects and checks or creates the table as above, retrying
  // after kUnavailable with a back-off from kLazyRetryFirst doubling to
  // kLazyRetryMax. Until it succeeds every call fails at once with
  // kUnavailable saying so (a fail-closed route answers 503, a fail-open
  // one runs unprotected). The first failure is logged (kWarning, to
  // store_options.log) and the success after it (kInfo), not each retry.
  // Any other error (a foreign or newer table, missing privileges) is a
  // refusal: logged as kError, never retried; the store stays unavailable,
  // every call's message saying why, until it is reopened. Once connected
  // it behaves as an eager store, outages included.
  static constexpr std::chrono::milliseconds kLazyRetryFirst{250};
  static constexpr std::chrono::milliseconds kLazyRetryMax{5000};
  static Result<std::unique_ptr<PostgresStore>> Open(
      const PostgresStoreOptions& options,
      const StoreOptions& store_options = {});

  // Opens the store a parsed `postgresql:` or `postgres:` URI names, as
  // OpenStore does. Parameters: table, pool, acquire_timeout_ms,
  // connect_timeout_s, statement_timeout_ms, sslmode, create, connect.
  // Errors: kInvalidArgument naming the URI (password redacted) when the
  // scheme is neither, when the port is not a number from 1 to 65535, when
  // the database name is missing or has a '/', when a parameter is
  // malformed or out of range, or when another parameter is present;
  // otherwise what Open returns, with the URI in the message.
  static Result<std::unique_ptr<Store>> OpenFromUri(
      StoreUri& uri, const StoreOptions& options);

  // Stops a lazy store's connecting thread (waiting for an attempt under
  // way: at most connect_timeout plus the schema statements' deadlines) and
  // closes every connection. Must not run concurrently with any other call
  // on this store.
  ~PostgresStore() override;

  PostgresStore(const PostgresStore&) = delete;
  PostgresStore& operator=(const PostgresStore&) = delete;

  // {"postgres", durable, shared_across_processes, max_concurrent_calls =
  // pool_size, acquire_timeout}: all from the options, so the same before a
  // lazy store connected. What is not known until then: whether the server
  // answers, whether the table exists (or may be created) at a version this
  // build knows, and the schema it lives in (transaction_target()).
  StoreInfo Info() const override;

  // The table, as given in the options.
  const std::string& table() const;

  // Exactly once (idem/sql_transaction.h; postgres_transaction.h has the
  // helper): completes the record of `id` with `stored` inside the
  // transaction open on the caller's connection `conn`, if and only if it is
  // in_progress with `token` (checked in the UPDATE itself), keeping its
  // expires_at. kStored: written in the caller's transaction, visible when
  // it commits. kClaimLost: nothing written; roll back. `stored` is stored
  // as given: pass ClaimHandle::StorableResponse. One round trip on `conn`
  // for a claim this store made (two otherwise), blocking (libpq's blocking
  // mode), bounded by the caller's own timeouts; the updated row stays locked
  // until the caller's transaction ends, so a duplicate's claim waits for it
  // (up to statement_timeout): keep the transaction short. The table is named
  // with the schema the store found it in at Open, whatever `conn`'s
  // search_path. Errors: kInvalidArgument when `conn` is null, in non-blocking
  // mode, not inside a transaction block (BEGIN first), in a failed
  // transaction, or connected to another database than the store's;
  // kUnavailable for a lazy store not connected yet, a broken connection and
  // SQLSTATE classes 08, 53, 57, 40 (a serialization failure under
  // REPEATABLE READ or SERIALIZABLE: roll back and retry the request) and
  // 55P03; kDataLoss for a record that does not decode;
  // kInternal otherwise. Messages name the store and table.
  Result<TransactionCompletion> CompleteInTransaction(PGconn* conn,
                                                      const RecordId& id,
                                                      const Token& token,
                                                      const Response& stored);
  // Where CompleteInTransaction writes, found at Open (by a lazy store at
  // its first connection: until then only `prefix` is set): the database
  // the store is connected to, the schema-qualified quoted table, and the
  // messages' prefix (for PostgresTransaction).
  struct TransactionTarget {
    std::string database;
    std::string table;
    std::string prefix;
    // The record this store's own claim of `token` wrote, if it still
    // remembers it (idem/store/claim_memo.h), so that the completion needs no
    // SELECT; nullopt otherwise.
    std::function<std::optional<Record>(const RecordId&, const Token&)> recall;
  };
  const TransactionTarget& transaction_target() const;

 protected:
  // The Store operations (store.h), each called through StoreBoundary
  // (idem/store/store_boundary.h: argument checks, exceptions as errors).
  // The Store calls; store.h states what each does, the file comment how
  // they fail. Claim: kInvalidArgument when ttl or lock_timeout is not
  // positive; on kUnavailable the claim may or may not have been written
  // (the connection broke after sending it), so a retry may get kInProgress
  // until the lock times out. Revoke deletes a row even when its record does
  // not decode. PurgeExpired deletes in statements of at most kPurgeBatch
  // rows (each its own transaction; those committed before an error stay
  // deleted), skips rows another call holds locked, so that instances
  // sweeping one table never wait for each other, and deletes rows whose
  // columns say expired even if their record is damaged.
  Result<ClaimResult> DoClaim(const RecordId& id, const Fingerprint& fp,
                              TimePoint now, Duration ttl,
                              Duration lock_timeout) override;
  Result<bool> DoComplete(const RecordId& id, const Token& token,
                          const Response& response) override;
  void DoClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                    Duration ttl, Duration lock_timeout,
                    StoreCallback<ClaimResult> done) override;
  void DoCompleteAsync(const RecordId& id, const Token& token,
                       std::shared_ptr<const Response> response,
                       StoreCallback<bool> done) override;
  Result<bool> DoRelease(const RecordId& id, const Token& token) override;
  Result<bool> DoRevoke(const RecordId& id) override;
  // A SELECT of the row (kDataLoss when it does not decode), then one
  // conditional UPDATE of locked_until and record, WHERE the row still has
  // the token, is in progress, not expired, and has the locked_until read
  // (a renewal of the same claim on another connection in between makes
  // it read again; kUnavailable after kClaimAttempts such races).
  Result<bool> DoExtendLock(const RecordId& id, const Token& token,
                            TimePoint now, Duration lock_timeout) override;
  // One SELECT count(*) ... GROUP BY over the columns (a sequential scan of
  // the table). Counts by the columns: a damaged record is counted by them,
  // never as damaged.
  Result<std::optional<StoreStats>> DoStats(TimePoint now) override;
  Result<std::optional<Record>> DoInspect(const RecordId& id,
                                          TimePoint now) override;
  Result<std::size_t> DoPurgeExpired(TimePoint now, std::size_t limit) override;

 private:
  friend class PostgresTransaction;
  // Tests' access to the claim-attempt hook (src/postgres_store_test_peer.h).
  friend class PostgresStoreTestPeer;
  class Impl;
  explicit PostgresStore(std::unique_ptr<Impl> impl);

  // PostgresTransaction(store) (postgres_transaction.h): a connection of the
  // pool lent to an application's transaction (postgres_transaction_target.h
  // defines it). Lend waits for it as every call does (acquire_timeout);
  // GiveBack returns it to the pool, or closes it unless it is idle and
  // healthy; FindLent is the open loan whose connection is `conn`, if any;
  // CompleteOnLent completes a record inside its transaction with the
  // store's prepared statements.
  struct Lent;
  Result<std::unique_ptr<Lent>> Lend();
  void GiveBack(std::unique_ptr<Lent> lent);
  Lent* FindLent(PGconn* conn);
  Result<TransactionCompletion> CompleteOnLent(Lent& lent, const RecordId& id,
                                               const Token& token,
                                               const Response& stored);
  // Open, naming the store `display` in messages (the redacted URI).
  static Result<std::unique_ptr<PostgresStore>> OpenNamed(
      const PostgresStoreOptions& options, const StoreOptions& store_options,
      std::string display);
  // OK once the store is connected (always for an eager one); kUnavailable
  // saying why until then (a lazy store).
  Status Connected() const;

  std::unique_ptr<Impl> impl_;
};

}  // namespace idem

#endif  // IDEM_POSTGRES_STORE_H_
