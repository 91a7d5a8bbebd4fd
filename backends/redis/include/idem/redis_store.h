// The Redis store, on one server or a Redis Cluster (SEMANTICS.md, "Stores,
// chosen by URI"):
//
//   redis://[user:password@]host:port/db?prefix=idem:&pool=8
//   redis-cluster://host:port[,host:port...]?prefix=idem:&pool=8
//
// Many server instances on many hosts share one Redis; Redis makes every
// decision, so the instances need no coordination of their own.
//
// Data: one Redis hash per record, under the key
//   <prefix>{<64 hex digits of the record id>}
// with the fields s (state: 1 in_progress, 2 completed), f (fingerprint, 32
// bytes), t (token, 16 bytes), l and e (locked_until and expires_at, whole
// microseconds since the Unix epoch, rounded up), k (1 when the claim was a
// takeover), c (the call that completed it) and r (EncodeRecord of the
// record, checksummed: record_codec.h). r is what every read returns; a
// record whose r does not decode, or disagrees with the other fields, or a
// key of another type, is kDataLoss, never a miss. The braces make the id
// the key's cluster hash tag, so a prefix must not contain '{' or '}'.
// No client key, scope or request body is ever written.
//
// Every state change is one Lua script on one key (EVALSHA, and EVAL when
// the server answers NOSCRIPT), so it is atomic on a server and on a
// cluster. Times are the `now` the caller passes (the Guard's Clock), never
// the server's: the scripts compare microseconds (Lua numbers are doubles),
// `now` rounded down and deadlines up, so a record is never treated as
// expired or unlocked before its time. The key also gets a Redis TTL of
// expires_at - now (PEXPIRE, at least 1 ms; none beyond ten years), so
// Redis deletes expired records by itself.
//
// Claim is one round trip: the script writes a fresh record when the id is
// free, expired, or in progress with the same fingerprint and its lock
// timed out (a takeover), and otherwise returns the record in the way, from
// which the claim table (ClaimBlockedBy) gives the answer. Complete is one
// round trip when this store made the claim (it remembers the claims'
// fields by token, in an idem::ClaimMemo) and two otherwise (a read first);
// the script writes only if the record is still in progress with the
// token. Release deletes only under the same condition; Revoke deletes
// whatever is there.
//
// Retries: a claim or complete whose connection broke or timed out is sent
// once more, on a fresh connection, with the same token (and, for Complete,
// the same call id): the script recognises its own earlier write, so the
// resend answers what the first attempt did. Every other failure is
// returned at once.
//
// PurgeExpired deletes records whose expires_at <= now that Redis has not
// yet deleted (a caller's clock ahead of Redis's TTL, a ManualClock):
// SCAN over <prefix>* on every master, one conditional delete per expired
// key. With the system clock the TTL has usually done it already.
//
// Connections: hiredis contexts (one thread at a time each), pooled per
// server, at most `pool` per server, opened lazily (one at Open, to check
// the server). After connecting, AUTH (user and password from the URI) and
// SELECT db (standalone only). A context that timed out, broke or got a
// protocol error is closed, never reused; an idle one that the server
// closed meanwhile is replaced before use. So after a server restart calls
// work again without reopening the store.
//
// Timeouts: connecting and every command are bounded by `timeout`
// (kUnavailable after it); waiting for a free connection by
// `acquire_timeout`.
//
// Cluster: the slot map comes from CLUSTER SLOTS of the first reachable
// seed node at Open; a key goes to the master of CRC16(hash tag) mod 16384.
// -MOVED refreshes the map and retries on the named node, -ASK sends ASKING
// and retries there once; at most kMaxRedirects redirections per call, then
// kUnavailable. Nodes named by the map get their own pools. A call that
// cannot reach its node also reads the map again (at most every 100 ms),
// so that after a failover calls go to the promoted replica.
//
// Safety checks at Open: a server whose maxmemory-policy is not noeviction
// may evict live records, and so silently run a request twice: Open
// refuses it (kInvalidArgument) unless `allow_eviction` is set. A server
// that disables CONFIG is opened with a warning to StoreOptions::log.
//
// Durability: a completed record survives any crash of the application; it
// survives a Redis restart only as far as the server's persistence goes
// (appendonly yes with appendfsync always loses nothing, everysec up to a
// second; RDB snapshots only what came since the last one; no persistence
// everything). With a replica, a failover loses what did not reach it;
// `wait` makes claims and completes wait for that many replicas (WAIT),
// and a call that times out waiting fails with kUnavailable (the write
// happened on the master and may be lost). Info().durable is true when
// the server had AOF or RDB snapshots on at Open.
//
// Errors: no connection, a broken connection, a timeout, -READONLY,
// -LOADING, -BUSY, -CLUSTERDOWN, -MASTERDOWN, -TRYAGAIN, too many
// redirections -> kUnavailable; -OOM -> kResourceExhausted; damaged records
// -> kDataLoss; anything else -> kInternal. Messages name the server
// (never the password).
//
// Thread-safety: every method may be called concurrently from any number of
// threads, except the destructor.

#ifndef IDEM_REDIS_STORE_H_
#define IDEM_REDIS_STORE_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/store_uri.h"
#include "idem/types.h"

namespace idem {

struct RedisStoreOptions {
  struct Node {
    std::string host;
    int port = 6379;
  };
  // The server (standalone) or the seed nodes (cluster): at least one.
  // URI: the host:port list.
  std::vector<Node> nodes;
  // A Redis Cluster instead of one server. URI: scheme redis-cluster.
  bool cluster = false;
  // AUTH after connecting when `password` is not empty (with `user` when
  // that is not empty either: an ACL user). URI: user:password@.
  std::string user;
  std::string password;
  // SELECT after connecting; standalone only (a cluster has database 0).
  // URI: the path, /0../15 or more. Default: 0.
  int db = 0;
  // Key prefix; no '{' or '}', at most 128 bytes. URI parameter `prefix`.
  // Default: "idem:".
  std::string prefix = "idem:";
  // Most connections per server. URI parameter `pool`, 1..1024. Default: 8.
  std::size_t pool_size = 8;
  // Bound of connecting and of every command. URI parameter `timeout_ms`,
  // 1..3600000. Default: 5 s.
  std::chrono::milliseconds timeout{5000};
  // How long a call waits for a free pooled connection. URI parameter
  // `acquire_timeout_ms`, 0..3600000. Default: 5 s.
  std::chrono::milliseconds acquire_timeout{5000};
  // Open a server whose maxmemory-policy may evict keys. URI parameter
  // `allow_eviction`. Default: false.
  bool allow_eviction = false;
  // Replicas a claim and a complete wait for (WAIT), 0 = none. URI
  // parameters `wait`, 0..64, and `wait_ms`, 1..3600000. Default: 0, 1 s.
  int wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{1000};
};

class RedisStore final : public Store {
 public:
  // Redirections (-MOVED, -ASK) one cluster call follows.
  static constexpr int kMaxRedirects = 5;
  // Reads of the record one ExtendLock makes when a renewal of the same
  // claim elsewhere moves its lock between the read and the write.
  static constexpr int kExtendAttempts = 4;

  // Connects (to one seed node at least, reading the slot map of a
  // cluster) and checks the server (see above). store_options.log gets the
  // warning about CONFIG; the clock is not used.
  // Errors: kInvalidArgument when an option is out of range, the prefix has
  // a brace, or the eviction policy is refused; kUnavailable when no server
  // answers within `timeout`; kInternal otherwise (AUTH refused, ...).
  static Result<std::unique_ptr<RedisStore>> Open(
      const RedisStoreOptions& options, const StoreOptions& store_options = {});

  // Opens the store a parsed `redis:` or `redis-cluster:` URI names, as
  // OpenStore does. Parameters: prefix, pool, timeout_ms,
  // acquire_timeout_ms, allow_eviction, wait, wait_ms.
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

  // The claim table of store.h. On kUnavailable the claim may or may not
  // have been written: a retry then gets kInProgress until the lock times
  // out. Errors: kInvalidArgument (ttl or lock_timeout not positive),
  // kDataLoss, kUnavailable, kResourceExhausted, kInternal.
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override;
  // store.h's contract; errors as for Claim.
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) override;
  Result<bool> Release(const RecordId& id, const Token& token) override;
  Result<bool> Revoke(const RecordId& id) override;
  // An HMGET of the record (kDataLoss when it does not decode), then the
  // extend script, which writes the new l and r only if the hash still has
  // the token, is in progress, not expired, and has the l read (else it
  // reads again; kUnavailable after kExtendAttempts such races). The
  // key's TTL is unchanged. Waits for replicas as Claim does.
  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) override;
  // A SCAN of the prefix on every server (every master of a cluster) and an
  // HMGET of s and e per key: counted by those fields, so a damaged record
  // whose fields read is counted by them; one whose s or e does not read is
  // damaged. Keys of other types under the prefix are skipped.
  Result<std::optional<StoreStats>> Stats(TimePoint now) override;
  Result<std::optional<Record>> Inspect(const RecordId& id,
                                        TimePoint now) override;
  // See above: a SCAN of every master.
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) override;

  // {"redis" or "redis-cluster", durable per the server's persistence,
  // shared_across_processes, calls_may_block, max_concurrent_calls = pool
  // size (per server), acquire_timeout}.
  StoreInfo Info() const override;

  // The Redis key of `id` (for tests and tools).
  std::string KeyOf(const RecordId& id) const;

  // The raw engine operation a claim is measured against (idem-bench):
  // `SET key value NX PX ttl` on the pooled connections of the server
  // holding `key`, one round trip. Returns whether the key was set.
  // Errors as for Claim. Not for production use: it bypasses the records.
  Result<bool> SetIfAbsentForBenchmark(std::string_view key,
                                       std::string_view value,
                                       std::chrono::milliseconds ttl);

 private:
  class Impl;
  explicit RedisStore(std::unique_ptr<Impl> impl);
  static Result<std::unique_ptr<RedisStore>> OpenNamed(
      const RedisStoreOptions& options, const StoreOptions& store_options,
      std::string display);

  std::unique_ptr<Impl> impl_;
};

}  // namespace idem

#endif  // IDEM_REDIS_STORE_H_
