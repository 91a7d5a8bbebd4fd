// The Redis store, on one server or a Redis Cluster (SEMANTICS.md, "Stores,
// chosen by URI"):
//
//   redis://[user:password@]host:port/db?prefix=idem:&pool=8&connect=eager
//   redis-cluster://host:port[,host:port...]?prefix=idem:&pool=8
//
// Many server instances on many hosts share one Redis; Redis makes every
// decision, so the instances need no coordination of their own.
//
// Data: one Redis string per record, under the key
//   <prefix>{<64 hex digits of the record id>}
// whose value is the core's EncodeRecord bytes (record_codec.h: a fixed
// 67-byte header of magic, version, state, fingerprint, token, locked_until
// and expires_at in nanoseconds, the response of a completed record, and a
// CRC-32C), followed, for a completed record, by the 16-byte id of the
// Complete call that wrote it (so that a resent Complete is recognised;
// reads strip it). A value that does not decode (short, bad magic or
// version, bad checksum), or a key of another type, is kDataLoss, never a
// miss. Records written by builds before this layout are hashes, and so
// read as damaged (kDataLoss): revoke them, or let their TTL expire. The
// braces make the id the key's cluster hash tag, so a prefix must not
// contain '{' or '}'. No client key, scope or request body is ever
// written.
//
// Times are the `now` the caller passes (the Guard's Clock), never the
// server's, and every time decision is made in C++ on the record read, in
// exact nanoseconds (ClaimBlockedBy, RenewedLockUntil, PeekExpiresAt):
// Redis compares no times, only bytes. The key also gets a Redis TTL of
// expires_at - now (PX, at least 1 ms; none beyond ten years), so Redis
// deletes expired records by itself.
//
// Claim is one plain command, SET key value NX GET PX ttl (Redis 7.0 or
// later), not a script: a script's fixed cost on the server is larger than
// the whole command (redis_store.cc has the figures). It writes a fresh
// record when the key is free; otherwise it returns the record in the way,
// and ClaimBlockedBy gives the answer (replay, in progress, mismatch). A
// record that no longer blocks (expired on the caller's clock, or in
// progress with the same fingerprint and its lock timed out: a takeover)
// is replaced by a script only if its header is still the one read; if it
// changed, the claim starts again, at most kClaimAttempts times, and then
// answers kInProgress with locked_until = now (store.h, "Lost races").
// Complete is one round trip when this store made the claim (it remembers
// the claims' fields by token, in an idem::ClaimMemo) and two otherwise (a
// GET first); its script writes only if the record is still in progress
// with the token, keeping the key's TTL. Release deletes only under the
// same condition; Revoke deletes whatever is there. Every command and
// script touches one key (scripts run with EVALSHA, and EVAL when the
// server answers NOSCRIPT), so each is atomic on a server and on a
// cluster.
//
// Retries: a claim or complete whose connection broke or timed out is sent
// once more, on a fresh connection, with the same record and token (and,
// for Complete, the same call id): a resent SET that finds this very
// record, and a resent script that finds its own write, answer what the
// first attempt did. Every other failure is returned at once.
//
// PurgeExpired deletes records whose expires_at <= now that Redis has not
// yet deleted (a caller's clock ahead of Redis's TTL, a ManualClock):
// SCAN over <prefix>* on every master, a pipelined GETRANGE of each key's
// header per page, and a conditional delete (the header unchanged) per
// expired key. With the system clock the TTL has usually done it already.
//
// Connections: hiredis contexts (one thread at a time each), pooled per
// server, at most `pool` per server, opened on demand (one at the first
// connect, to check the server). After connecting, AUTH (user and password
// from the URI) and SELECT db (standalone only). A context that timed out,
// broke or got a protocol error is closed, never reused; an idle one that
// the server closed meanwhile is replaced before use. So after a server
// restart calls work again without reopening the store. A context whose
// server answers -READONLY (a replica now), -LOADING, -MASTERDOWN,
// -CLUSTERDOWN or -TRYAGAIN is closed too, and the command (which did not
// run) is sent once more on a fresh connection, which resolves the host
// name again: a managed Redis whose endpoint moves to the promoted replica
// is followed without a restart (a cluster also reads its slot map again).
//
// Connecting (`connect`): eager (the default) connects and checks the
// servers in Open, which fails with what it found. Lazy opens without
// reaching them: every call is then kUnavailable ("not connected yet",
// with the attempts and the last error) until a background connect and
// its checks succeed; it is retried after 100 ms, doubling to at most
// 5 s, with one warning per episode of failures and one line when it
// connects. Until then Info().durable is false (the persistence, the
// eviction policy and the version are not known), and a check that then
// refuses the server is an error line and keeps every call unavailable.
//
// Timeouts: connecting and every command are bounded by `timeout`
// (kUnavailable after it); waiting for a free connection by
// `acquire_timeout`.
//
// Asynchronous calls (redis only; Info().async_calls): ClaimAsync and
// CompleteAsync make the same commands as Claim and Complete on one
// pipelined hiredis asynchronous connection, driven by one thread that
// the store starts at its first asynchronous call (src/redis_async_loop.h);
// `done` runs on that thread. Each call is answered within `timeout` of
// its start (kUnavailable "timed out"; the stuck connection is dropped and
// the next call connects again, on that thread). The destructor answers
// every call in flight (kUnavailable) before it returns. A cluster's
// asynchronous calls are the synchronous ones (async_calls false).
//
// Cluster: the slot map comes from CLUSTER SLOTS of the first reachable
// seed node at Open; a key goes to the master of CRC16(hash tag) mod 16384.
// -MOVED refreshes the map and retries on the named node, -ASK sends ASKING
// and retries there once; at most kMaxRedirects redirections per call, then
// kUnavailable. Nodes named by the map get their own pools. A call that
// cannot reach its node also reads the map again (at most every 100 ms),
// so that after a failover calls go to the promoted replica.
//
// Safety checks, at the first connect and again every `check_interval`
// (and within a second of an -OOM, an odd reply or a completion whose
// record vanished): a server whose maxmemory-policy is not noeviction may
// evict live records, and so silently run a request twice: refused
// (kInvalidArgument at an eager Open) unless `allow_eviction` is set. A
// server older than Redis 7.0 (INFO server) is refused too: it does not
// take the claim's SET ... NX GET. A server that requires a password the
// URI lacks (NOAUTH) is refused (kInternal). Refused after Open, every
// call is kUnavailable (fail-closed routes answer 503, fail-open ones run
// unprotected) and an error is logged once, until a check passes again
// (logged too). A server that disables CONFIG gets a warning to
// StoreOptions::log, and so does one that persists nothing (no AOF, no
// RDB save points: a restart forgets every record).
//
// A full server (noeviction at maxmemory) refuses every SET with -OOM,
// even one that would not write: a claim then reads the record in the way
// (GET) and answers it as usual, and is kResourceExhausted only when it
// would have to write. A script's write is its first, which Redis refuses
// under -OOM, so a full server does not grow.
//
// Durability: a completed record survives any crash of the application; it
// survives a Redis restart only as far as the server's persistence goes
// (appendonly yes with appendfsync always loses nothing, everysec up to a
// second; RDB snapshots only what came since the last one; no persistence
// everything). With a replica, a failover loses what did not reach it;
// `wait` makes claims and completes wait for that many replicas (WAIT),
// and a call that times out waiting fails with kUnavailable (the write
// happened on the master and may be lost). Info().durable is true when
// every server had AOF or RDB snapshots on at the last check.
//
// Errors: no connection, a broken connection, a timeout, -READONLY,
// -LOADING, -BUSY, -CLUSTERDOWN, -MASTERDOWN, -TRYAGAIN, too many
// redirections, not connected yet, a refused server -> kUnavailable; -OOM
// -> kResourceExhausted; damaged records -> kDataLoss; anything else ->
// kInternal. Messages name the server (never the password).
//
// A Complete that finds no record at all (evicted, or deleted: revoked, a
// DEL by hand) returns false, as for a claim taken over, and logs a
// warning "the record vanished: evicted or deleted" with the record id.
//
// Thread-safety: every method may be called concurrently from any number of
// threads, except the destructor. Each store runs one background thread
// (the connect and the checks), and a second one once an asynchronous call
// was made; the destructor stops them, waiting for a check under way (at
// most `timeout` per server).

#ifndef IDEM_REDIS_STORE_H_
#define IDEM_REDIS_STORE_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/record.h"
#include "idem/redis_store_options.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/store/store_boundary.h"
#include "idem/store_uri.h"
#include "idem/types.h"

namespace idem {

class RedisStore final : public StoreBoundary {
 public:
  // Redirections (-MOVED, -ASK) one cluster call follows.
  static constexpr int kMaxRedirects = 5;
  // Reads of the record one ExtendLock makes when a renewal of the same
  // claim elsewhere moves its lock between the read and the write.
  static constexpr int kExtendAttempts = 4;
  // SETs one Claim makes when the record in the way changes between its
  // read and the script that would replace it (another claim took it over,
  // completed, renewed or released it).
  static constexpr int kClaimAttempts = 4;

  // Eager: connects (to one seed node at least, reading the slot map of a
  // cluster) and checks the servers (see above). Lazy: starts connecting
  // in the background and fails only for bad options. store_options.log
  // gets the warnings and errors above; the clock is not used.
  // Errors: kInvalidArgument when an option is out of range, the prefix has
  // a brace, the eviction policy is refused or a server is older than
  // Redis 7.0; kUnavailable when no server answers within `timeout`;
  // kInternal otherwise (NOAUTH: the URI lacks the password; AUTH refused:
  // WRONGPASS, ...), naming the cause, never the password.
  static Result<std::unique_ptr<RedisStore>> Open(
      const RedisStoreOptions& options, const StoreOptions& store_options = {});

  // Opens the store a parsed `redis:` or `redis-cluster:` URI names, as
  // OpenStore does. Parameters: prefix, pool, timeout_ms,
  // acquire_timeout_ms, allow_eviction, connect, check_interval_ms, wait,
  // wait_ms.
  // Errors: kInvalidArgument naming the URI (password redacted) for another
  // scheme, a bad host list, path or parameter; otherwise what Open
  // returns, with the URI in the message.
  static Result<std::unique_ptr<Store>> OpenFromUri(
      StoreUri& uri, const StoreOptions& options);

  // A redis-cluster URI lists hosts separated by commas, which RFC 3986
  // does not allow: this moves every host but the first into a `nodes`
  // parameter (host:port,host:port) that OpenFromUri reads, so that
  // StoreUri can parse it. Any other text is returned unchanged.
  static std::string ClusterUriForParsing(std::string_view uri);

  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  // {"redis" or "redis-cluster", durable per the servers' persistence at
  // the last check (false until a check passed: a lazy store not yet
  // connected), shared_across_processes, calls_may_block,
  // max_concurrent_calls = pool size (per server), acquire_timeout,
  // async_calls for "redis" only}.
  StoreInfo Info() const override;

  // The Redis key of `id` (for tests and tools).
  std::string KeyOf(const RecordId& id) const;

 protected:
  // The Store operations (store.h), each called through StoreBoundary
  // (idem/store/store_boundary.h: argument checks, exceptions as errors).
  // The claim table of store.h (see "Claim" above). On kUnavailable the
  // claim may or may not have been written: a retry then gets kInProgress
  // until the lock times out. Errors: kInvalidArgument (ttl or
  // lock_timeout not positive), kDataLoss (a value that does not decode, a
  // key of another type), kUnavailable, kResourceExhausted (-OOM, when the
  // claim would write), kInternal.
  Result<ClaimResult> DoClaim(const RecordId& id, const Fingerprint& fp,
                              TimePoint now, Duration ttl,
                              Duration lock_timeout) override;
  // store.h's contract; errors as for Claim.
  Result<bool> DoComplete(const RecordId& id, const Token& token,
                          const Response& response) override;
  // redis: the asynchronous calls (see "Asynchronous calls" above);
  // redis-cluster: the synchronous calls, made inside (async_calls false).
  void DoClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                    Duration ttl, Duration lock_timeout,
                    StoreCallback<ClaimResult> done) override;
  void DoCompleteAsync(const RecordId& id, const Token& token,
                       std::shared_ptr<const Response> response,
                       StoreCallback<bool> done) override;
  Result<bool> DoRelease(const RecordId& id, const Token& token) override;
  Result<bool> DoRevoke(const RecordId& id) override;
  // A GET of the record (kDataLoss when it does not decode), the decision
  // (RenewedLockUntil) in C++, then the extend script, which writes the
  // renewed record only if the header is still the one read (else, if the
  // record is still in progress with the token, it reads again;
  // kUnavailable after kExtendAttempts such races). The key's TTL is
  // unchanged. Waits for replicas as Claim does.
  Result<bool> DoExtendLock(const RecordId& id, const Token& token,
                            TimePoint now, Duration lock_timeout) override;
  // A SCAN of the prefix on every server (every master of a cluster) and a
  // GETRANGE of each value's header: counted by its state and expires_at,
  // so a record whose body is damaged is counted by its header; a value
  // too short or with a bad magic or version is damaged. Keys of other
  // types under the prefix (hashes of earlier builds too) are skipped.
  Result<std::optional<StoreStats>> DoStats(TimePoint now) override;
  Result<std::optional<Record>> DoInspect(const RecordId& id,
                                          TimePoint now) override;
  // See above: a SCAN of every master. Keys of other types and damaged
  // headers are left alone.
  Result<std::size_t> DoPurgeExpired(TimePoint now, std::size_t limit) override;
  // Every call: kUnavailable until connected and while a check refuses the
  // server (src/redis_server_watch.h); -OOM and odd replies
  // (kResourceExhausted, kInternal) ask for a check.
  Status BeforeCall(std::string_view op) override;
  void AfterError(const Error& error) override;

 private:
  // Tests' and idem-bench's access (src/redis_store_test_peer.h).
  friend class RedisStoreTestPeer;
  class Impl;
  explicit RedisStore(std::unique_ptr<Impl> impl);
  static Result<std::unique_ptr<RedisStore>> OpenNamed(
      const RedisStoreOptions& options, const StoreOptions& store_options,
      std::string display);

  std::unique_ptr<Impl> impl_;
};

}  // namespace idem

#endif  // IDEM_REDIS_STORE_H_
