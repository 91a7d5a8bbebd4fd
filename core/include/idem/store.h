// The storage SPI every backend implements (SEMANTICS.md, "The store
// operations").
//
// A Store keeps one Record per RecordId and applies the claim table
// atomically. Outcomes of the claim table are values; only backend failures
// (I/O, lost connection, undecodable record, capacity) are errors, and an
// error never stands in for an outcome: a store that cannot tell must fail.
//
// Thread-safety: every Store is safe for concurrent use by any number of
// threads without external locking. Stores marked shared_across_processes in
// StoreInfo keep that guarantee across processes too.

#ifndef IDEM_STORE_H_
#define IDEM_STORE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/log.h"
#include "idem/metrics.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/types.h"

namespace idem {

enum class ClaimOutcome {
  // The caller holds the key and must Complete or Release it with `token`.
  kAcquired,
  // Another request holds the key until `locked_until`.
  kInProgress,
  // The key's request finished; `response` is what to replay.
  kCompleted,
  // The key was used with a different request fingerprint.
  kMismatch,
};

std::string_view ClaimOutcomeName(ClaimOutcome outcome);

struct ClaimResult {
  ClaimOutcome outcome = ClaimOutcome::kAcquired;
  // kAcquired: the new fencing token.
  Token token;
  // kAcquired: true when an in_progress record whose lock had timed out was
  // taken over (its holder's Complete will now return false).
  bool takeover = false;
  // kAcquired: the new lock's end. kInProgress: when the holder's lock ends.
  TimePoint locked_until;
  // kCompleted: the stored response (shared, immutable).
  std::shared_ptr<const Response> response;
  // kCompleted: when the record expires, so that a cache in front
  // (LocalCacheStore) keeps the answer without reading the record back.
  // ClaimBlockedBy, which every store of idem's decides with, sets it;
  // TimePoint{} (not said) from a store that builds its answers itself.
  TimePoint expires_at{};
};

// The claim table (SEMANTICS.md) for the record a claim finds under its id:
// the answer when that record stands in the way — kMismatch (another
// fingerprint), kCompleted (with its response) or kInProgress (with its
// locked_until) — or nullopt when the claim may write a fresh record over
// it: expired (treated as absent, whatever its fingerprint), or in progress
// with its lock timed out (a takeover; then `existing.Expired(now)` is
// false). Every backend decides a claim with this one function.
std::optional<ClaimResult> ClaimBlockedBy(const Record& existing,
                                          const Fingerprint& fp, TimePoint now);

// The record a claim that acquires writes: in progress, `fp`, a new token,
// expiring at now + ttl and locked until now + lock_timeout but never past
// its expiry. Both sums saturate instead of overflowing, so a ttl of
// Duration::max() means "never expires", not a time in the past. `ttl` and
// `lock_timeout` must be positive. Every backend claims with this function.
Record NewClaimRecord(const Fingerprint& fp, TimePoint now, Duration ttl,
                      Duration lock_timeout);

// The answer of a claim that wrote `fresh` (NewClaimRecord's): kAcquired
// with its token and locked_until; `takeover` when it replaced a live
// record whose lock had timed out.
ClaimResult ClaimAcquired(const Record& fresh, bool takeover);

// Store::ExtendLock's decision for the record a renewal finds: its new
// locked_until when `token` holds it (in progress under that token) and it
// has not expired at `now` — min(now + lock_timeout, expires_at), and never
// earlier than the current locked_until — or nullopt when the renewal fails
// and nothing may change. The sum saturates as in NewClaimRecord. Every
// backend renews with this function.
std::optional<TimePoint> RenewedLockUntil(const Record& record,
                                          const Token& token, TimePoint now,
                                          Duration lock_timeout);

// What OpenStore and the backends' typed Open functions take besides the URI.
struct StoreOptions {
  // Time source for background work (the sweeper, RocksDB's compaction
  // filter). Defaults to SystemClock.
  std::shared_ptr<Clock> clock;
  // How often OpenStore's background sweeper (sweeper.h) deletes expired
  // records; zero turns it off (then call PurgeExpired yourself, or records
  // past their ttl stay until their id is claimed again). The URI parameter
  // `sweep_interval_s` (0..86400), accepted by every scheme, overrides it.
  // Only OpenStore reads it: a backend's typed Open starts no sweeper.
  // Default: 60 s.
  Duration sweep_interval = std::chrono::seconds(60);
  // Where the sweeper reports a failed pass (kWarning). Default: nowhere.
  LogSink log;
  // Where the sweeper counts its deletions and failed passes
  // (SweeperOptions::metrics) and a remote store's local cache its hits,
  // misses and evictions (LocalCacheOptions::metrics): pass the Guard's
  // Metrics (GuardSetup::metrics) to export them with its counters. Only
  // OpenStore and the stores' URI openers read it. Default: not counted.
  std::shared_ptr<Metrics> metrics;
};

struct StoreInfo {
  std::string name;      // "memory", "rocksdb", ...
  bool durable = false;  // Completed records survive a process crash.
  bool shared_across_processes = false;  // Several processes may share it.
  // Whether a call may block its thread on I/O or a lock (a disk, a
  // server, a pool). Adapters call a store that may block from a thread
  // pool, one that never does inline on their I/O threads. Default: true.
  bool calls_may_block = true;
  // Most calls the store serves at once without waiting inside (its
  // connection pool's size); 0 when it names no bound. Adapters size their
  // store-call thread pools by it.
  std::size_t max_concurrent_calls = 0;
  // How long a call may wait for a resource of the store (a pooled
  // connection) before it fails; 0 when it never waits for one. Adapters
  // bound the wait of a queued store call by it.
  std::chrono::milliseconds acquire_timeout{0};
  // Whether ClaimAsync and CompleteAsync answer without blocking the
  // calling thread: the store's own thread or event loop does the work
  // and calls back. Adapters then make those two calls from their I/O
  // threads (no hop to the store-call pool and back) and keep the pool for
  // the others. Default: false (they are the synchronous calls, made
  // inside).
  bool async_calls = false;
};

// How an asynchronous store call (Store::ClaimAsync, CompleteAsync) answers:
// called exactly once with what the synchronous call would return.
template <typename T>
using StoreCallback = std::function<void(Result<T>)>;

// Record counts of Store::Stats.
struct StoreStats {
  std::uint64_t in_progress = 0;  // Live, in progress (locked or not).
  std::uint64_t completed = 0;    // Live, completed.
  std::uint64_t expired = 0;      // Past expires_at, not purged yet.
  // Live records the store cannot read (Revoke removes them). Stores that
  // count by the columns or fields they keep beside the value see only
  // those columns' damage (each store's header says which).
  std::uint64_t damaged = 0;

  // Counts one record of `state` expiring at `expires_at`, as of `now`.
  void Count(RecordState state, TimePoint expires_at, TimePoint now) {
    CountRows(expires_at <= now, static_cast<std::int64_t>(state), 1);
  }
  // Counts `n` records, expired or not, with the stored state value `state`
  // (RecordState's integer; any other value is damaged): for stores that
  // count in a query.
  void CountRows(bool is_expired, std::int64_t state, std::uint64_t n);
};

class Store {
 public:
  virtual ~Store() = default;

  // Applies the claim table of SEMANTICS.md to the record of `id` as of
  // `now`, atomically with respect to every other call on the same id:
  //  - no record, or expires_at <= now: writes in_progress with a new token,
  //    expires_at = now + ttl, locked_until = min(now + lock_timeout,
  //    expires_at) and returns kAcquired;
  //  - a live record with another fingerprint: kMismatch;
  //  - completed, same fingerprint: kCompleted with the response;
  //  - in_progress, same fingerprint, locked_until > now: kInProgress;
  //  - in_progress, same fingerprint, locked_until <= now: kAcquired with a
  //    new token and takeover = true (expires_at is renewed as for a new
  //    record).
  // Lost races: a store that cannot decide in one atomic step (the SQL
  // stores: a write that found a record in the way, then a read of it)
  // retries a bounded number of times when the record it met vanished
  // (released, revoked, purged) before it could read it. A claim that loses
  // every attempt answers kInProgress, on every store (the client retries
  // later), never an error, with locked_until = `now`: no holder is known,
  // so there is no later time to promise. The memory store (one CAS decides)
  // and RocksDB (one in-process lock per id) never lose such a race.
  // Errors: kUnavailable (backend unreachable or busy), kDataLoss (the stored
  // record cannot be decoded), kResourceExhausted (no room for a new live
  // record), kInvalidArgument (ttl or lock_timeout not positive).
  virtual Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                                    TimePoint now, Duration ttl,
                                    Duration lock_timeout) = 0;

  // Claim, when this store can answer it at once without blocking (no I/O,
  // no wait for a server, a pool or a lock held across I/O): exactly the
  // answer and the effects Claim would have. nullopt when it cannot, with
  // no effect; the caller then calls Claim, from a thread that may block.
  // It lets an adapter's I/O thread answer what needs no round trip (a
  // local cache's hit, local_cache.h) and take the store-call pool only for
  // the rest (Guard::BeginWithoutBlocking). A store whose calls never block
  // (Info().calls_may_block false) is simply called; it need not override
  // this. Default: nullopt.
  virtual std::optional<Result<ClaimResult>> TryClaimWithoutBlocking(
      const RecordId& id, const Fingerprint& fp, TimePoint now, Duration ttl,
      Duration lock_timeout) {
    (void)id, (void)fp, (void)now, (void)ttl, (void)lock_timeout;
    return std::nullopt;
  }

  // Stores `response` and marks the record completed, keeping its
  // expires_at, if and only if it is in_progress with `token`. Returns false
  // and changes nothing otherwise (released, taken over, expired and
  // reclaimed, or already completed).
  virtual Result<bool> Complete(const RecordId& id, const Token& token,
                                const Response& response) = 0;

  // Complete for a caller that already holds the response in a shared_ptr
  // (the Guard does): a store that keeps responses in memory may keep this
  // very object instead of copying it. Same contract as Complete; the default
  // copies through Complete.
  virtual Result<bool> CompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const Response> response) {
    return Complete(id, token, *response);
  }

  // Claim and CompleteShared for a caller that must not block (an adapter's
  // I/O thread), on a store whose Info().async_calls is true: the same
  // contracts, atomicity and effects, and `done` gets what the synchronous
  // call would return, exactly once: inside the call (an argument error)
  // or later on a thread of the store's. The store copies what it needs of
  // the arguments before it returns. `done` must not block, throw, nor
  // call the store synchronously (it may run on the thread that serves the
  // store's calls, among other calls' answers); it may hand the answer to
  // another thread. `done` is called
  // within the bounds the synchronous call has (the store's own timeouts:
  // a queue it could not leave in time fails with kUnavailable and has no
  // effect), and before the store's destructor returns.
  // Default (async_calls false): the synchronous call, made inside, then
  // `done`; it blocks as that call does.
  virtual void ClaimAsync(const RecordId& id, const Fingerprint& fp,
                          TimePoint now, Duration ttl, Duration lock_timeout,
                          StoreCallback<ClaimResult> done) {
    done(Claim(id, fp, now, ttl, lock_timeout));
  }
  virtual void CompleteAsync(const RecordId& id, const Token& token,
                             std::shared_ptr<const Response> response,
                             StoreCallback<bool> done) {
    done(CompleteShared(id, token, std::move(response)));
  }

  // Deletes the record if and only if it is in_progress with `token`; returns
  // whether it did.
  virtual Result<bool> Release(const RecordId& id, const Token& token) = 0;

  // Deletes the record of `id` whatever its state (completed, in progress,
  // expired, or damaged so that it does not decode) and returns whether
  // there was one. For operators (idemctl revoke), to remove a damaged
  // record or let a key run again. A holder of the revoked claim loses it:
  // its later Complete and Release return false, and the next claim of
  // `id` acquires afresh (no takeover). Atomic with respect to every other
  // call on the same id: a concurrent claim either sees the record or
  // acquires after the revoke, never both. Errors: kUnavailable (backend
  // unreachable or busy); nothing was deleted then, or the delete's outcome
  // is unknown only if the backend itself says so.
  virtual Result<bool> Revoke(const RecordId& id) = 0;

  // Lock renewal for a slow handler: if and only if the record of `id` is
  // in_progress with `token` and has not expired at `now`, sets its
  // locked_until to min(now + lock_timeout, expires_at), never earlier than
  // it is, and returns true. Returns false and changes nothing otherwise
  // (released, revoked, taken over, completed, expired, absent): the caller
  // has lost the claim and its Complete will fail too. A holder whose lock
  // has timed out but that nobody took over still holds the record, and
  // renewing it is allowed. At most one write per call on every store (none
  // when it returns false, or when the lock already ends where it would be
  // set). Atomic with
  // respect to every other call on the same id. Errors: kUnavailable,
  // kDataLoss (the record cannot be decoded), kInvalidArgument
  // (lock_timeout not positive).
  virtual Result<bool> ExtendLock(const RecordId& id, const Token& token,
                                  TimePoint now, Duration lock_timeout) = 0;

  // How many records the store holds, by state, as of `now` (for idemctl
  // stats and operators), or nullopt when the store cannot count them
  // without reading every record. May read the whole store: not for a
  // request path. Errors: kUnavailable.
  virtual Result<std::optional<StoreStats>> Stats(TimePoint now);

  // The live record of `id` as of `now`, or nullopt when there is none or it
  // has expired. For tools and tests.
  virtual Result<std::optional<Record>> Inspect(const RecordId& id,
                                                TimePoint now) = 0;

  // Deletes up to `limit` records with expires_at <= now; returns how many.
  // Each call does work bounded by `limit` (and by the records it must
  // examine), so a sweeper can call it in batches (sweeper.h). Safe
  // alongside claims: a record claimed again meanwhile is never deleted.
  virtual Result<std::size_t> PurgeExpired(TimePoint now,
                                           std::size_t limit) = 0;

  virtual StoreInfo Info() const = 0;
};

}  // namespace idem

#endif  // IDEM_STORE_H_
