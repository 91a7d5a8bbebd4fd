// A local cache in front of a remote store (docs/STORES.md, "Local cache"):
// a Store decorator that keeps the completed records this process has seen
// (completed through it, or found by a claim on a replay) in memory and
// answers a claim of such a record without a round trip to the store.
//
// What it answers from memory: only a claim whose id has a fresh entry,
// from Claim or, without blocking, from TryClaimWithoutBlocking (so an
// adapter's I/O thread answers a hit with no hop to its store-call pool). An
// entry is a completed record exactly as the store keeps it (its
// fingerprint, expires_at and stored response; a sealed or compressed
// response stays the opaque envelope the store holds), and the claim is
// decided by ClaimBlockedBy, the function every store decides with: the
// same fingerprint replays (kCompleted), another one is kMismatch, and a
// record expired at the claim's `now` is no answer (the claim goes to the
// store). Every other call, and every claim without a fresh entry (a new
// key, an in-progress record), goes to the inner store.
//
// Freshness (the revoke window): an entry is fresh for `ttl` after it was
// filled, measured by `clock`, and never at or past its record's own
// expires_at (measured by the claim's `now`, as the store measures it), so
// an entry never outlives its record. A Revoke through this store clears
// the entry before and after the inner Revoke: once it returns, no claim
// in this process replays the revoked record. A revoke made elsewhere
// (idemctl, another instance) is seen once the entry is no longer fresh:
// after at most `ttl`. A PurgeExpired(now) through this store makes every
// entry expired at `now` unusable, as the store deleted those records.
//
// Fills: a claim of the store that answers kCompleted is kept from its
// answer (the response and ClaimResult::expires_at); from a store that
// does not fill expires_at it costs one more call (Inspect) on the
// synchronous path and is not kept on the asynchronous one. A completion
// through this store costs none (the claim it completes told the record's
// expiry). A fill that raced a Revoke, or a claim that
// acquired, of the same id in this process is dropped (an epoch per slot
// of ids), so a stale record is never put back.
//
// Metrics: with `metrics` set, every claim counts one hit
// (CountedEvent::kLocalCacheHit, idem_store_local_cache_hits_total) or one
// miss (kLocalCacheMiss), and every entry dropped for room one eviction
// (kLocalCacheEviction): a relaxed atomic increment each, no lock.
//
// Memory: at most `max_records` entries and about `max_bytes` of responses
// (each entry is charged its status, headers and body plus a fixed
// overhead); the least recently used entry of a shard goes first. A
// response larger than a shard's share of `max_bytes` is not cached.
//
// Thread-safety: every call may be made from any number of threads. The
// table is sharded by id (a mutex per shard, held for a lookup or an
// insert, never across a call of the inner store).

#ifndef IDEM_STORE_LOCAL_CACHE_H_
#define IDEM_STORE_LOCAL_CACHE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/metrics.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/store/claim_memo.h"
#include "idem/store/store_boundary.h"
#include "idem/store_uri.h"
#include "idem/types.h"

namespace idem {

struct LocalCacheOptions {
  // Most records kept; 0 turns the cache off. URI parameter `local_cache`,
  // 0..16777216. Default: 0 (off).
  std::size_t max_records = 0;
  // How long an entry is replayed from memory after it was filled (never
  // past its record's expires_at): the longest a revoke made elsewhere goes
  // unseen. URI parameter `local_cache_ttl_s`, 1..3600. Default: 5 s.
  Duration ttl = std::chrono::seconds(5);
  // About how many bytes of responses the entries may hold. URI parameter
  // `local_cache_mb` (MiB), 1..65536. Default: 64 MiB.
  std::size_t max_bytes = std::size_t{64} << 20;
  // Measures freshness. Default (null): SystemClock.
  std::shared_ptr<Clock> clock;
  // Where hits, misses and evictions are counted (metrics.h,
  // idem_store_local_cache_*_total); OpenWithLocalCache passes
  // StoreOptions::metrics, so OpenStore's caller exports them with the
  // Guard's counters by giving it the Guard's Metrics. Default (null): not
  // counted (counters() still counts).
  std::shared_ptr<Metrics> metrics;
};

// The URI parameters of the cache, read from (and removed from) `uri`:
// `local_cache`, `local_cache_ttl_s`, `local_cache_mb`, with the ranges
// above. `out.clock` is left as it is. Errors: kInvalidArgument naming the
// parameter, its range and the value (StoreUri's readers), or
// "local_cache_ttl_s and local_cache_mb need local_cache > 0" when one of
// them is given with the cache off, so that a cache the operator thinks is on
// is never silently off.
Status ReadLocalCacheOptions(StoreUri& uri, LocalCacheOptions& out);

// Counters of one cache, for tests, benchmarks and the report; the metrics
// an operator reads are LocalCacheOptions::metrics.
struct LocalCacheCounters {
  std::uint64_t hits = 0;       // Claims answered from memory.
  std::uint64_t misses = 0;     // Claims that went to the store.
  std::uint64_t fills = 0;      // Entries put in.
  std::uint64_t evictions = 0;  // Entries dropped for room.
};

class LocalCacheStore final : public StoreBoundary {
 public:
  // `inner` itself when options.max_records is 0, else `inner` behind a
  // cache. Errors: kInvalidArgument when `ttl` is not positive or
  // max_bytes is 0 (ReadLocalCacheOptions never gives either).
  static Result<std::unique_ptr<Store>> Wrap(std::unique_ptr<Store> inner,
                                             LocalCacheOptions options);

  ~LocalCacheStore() override;

  // The inner store's (async_calls included: the cache answers its hits
  // and keeps its fills through the inner store's asynchronous calls too).
  StoreInfo Info() const override { return inner_->Info(); }
  LocalCacheCounters counters() const;
  // Entries held now (fresh or not).
  std::size_t size() const;

 protected:
  Result<ClaimResult> DoClaim(const RecordId& id, const Fingerprint& fp,
                              TimePoint now, Duration ttl,
                              Duration lock_timeout) override;
  // DoClaim and DoCompleteShared over the inner store's asynchronous calls:
  // a hit is answered inside the call; the rest as DoClaim and
  // DoCompleteShared do, in the inner store's callback, except that a
  // claim answered kCompleted by a store that does not say when the record
  // expires (ClaimResult::expires_at) is not read back to be cached: the
  // read would block the inner store's thread.
  void DoClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                    Duration ttl, Duration lock_timeout,
                    StoreCallback<ClaimResult> done) override;
  void DoCompleteAsync(const RecordId& id, const Token& token,
                       std::shared_ptr<const Response> response,
                       StoreCallback<bool> done) override;
  // A fresh entry's answer (a hit, counted); nullopt otherwise (not
  // counted: the Claim that follows counts it).
  std::optional<Result<ClaimResult>> DoTryClaimWithoutBlocking(
      const RecordId& id, const Fingerprint& fp, TimePoint now, Duration ttl,
      Duration lock_timeout) override;
  Result<bool> DoComplete(const RecordId& id, const Token& token,
                          const Response& response) override;
  Result<bool> DoCompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const Response> response) override;
  Result<bool> DoRelease(const RecordId& id, const Token& token) override;
  Result<bool> DoRevoke(const RecordId& id) override;
  Result<bool> DoExtendLock(const RecordId& id, const Token& token,
                            TimePoint now, Duration lock_timeout) override;
  Result<std::optional<StoreStats>> DoStats(TimePoint now) override;
  Result<std::optional<Record>> DoInspect(const RecordId& id,
                                          TimePoint now) override;
  Result<std::size_t> DoPurgeExpired(TimePoint now, std::size_t limit) override;

 private:
  class Table;

  LocalCacheStore(std::unique_ptr<Store> inner, LocalCacheOptions options);
  // Puts `record` in the table (Table::Insert); an exception (no memory)
  // leaves it uncached.
  void Keep(const RecordId& id, Record record, TimePoint fresh_until,
            std::uint64_t epoch) noexcept;
  // Keeps the record a claim answered kCompleted from the answer itself
  // (its response and expires_at); false, keeping nothing, when the store
  // did not say when the record expires.
  bool KeepReplayed(const RecordId& id, const Fingerprint& fp,
                    const ClaimResult& claim, TimePoint clock_now,
                    std::uint64_t epoch);
  // Keeps the record a completion through this store wrote: the claim's
  // remembered `fields` with `response`.
  void KeepCompleted(const RecordId& id, const Token& token,
                     const ClaimFields& fields,
                     std::shared_ptr<const Response> response,
                     TimePoint clock_now, std::uint64_t epoch);

  std::unique_ptr<Store> inner_;
  LocalCacheOptions options_;
  std::unique_ptr<Table> table_;
  // The claims this store acquired, so that their completion can be cached
  // without a read (ClaimMemo: a claim it forgot is simply not cached).
  ClaimMemo claims_;
};

// For the descriptors of remote stores: reads the cache's parameters from
// `uri`, opens the store with `open` (which reads the rest), and puts the
// cache in front when `local_cache` > 0 (its clock: options.clock; its
// metrics: options.metrics).
Result<std::unique_ptr<Store>> OpenWithLocalCache(
    StoreUri& uri, const StoreOptions& options,
    Result<std::unique_ptr<Store>> (*open)(StoreUri&, const StoreOptions&));

}  // namespace idem

#endif  // IDEM_STORE_LOCAL_CACHE_H_
