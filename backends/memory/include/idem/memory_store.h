// The lock-free in-memory store: `memory:?capacity=N&max_bytes=M`
// (docs/SEMANTICS.md, "Stores, chosen by URI").
//
// Durability and processes: records live in this process only; they are lost
// when it exits and are not shared with other processes (Info(): durable =
// false, shared_across_processes = false, calls_may_block = false). For
// one-instance deployments, tests, and as the fastest backend.
//
// Progress: Claim, Complete, Release, Revoke, Inspect and PurgeExpired take
// no mutex and never wait for another thread. They are lock-free, not
// wait-free: a call retries only when another call changed the same hash
// bucket (or budget stripe) in between, so some call always completes, but
// one call may retry under heavy contention on one key. A thread descheduled
// in the middle of a call holds back the reclamation of at most the one
// record chain it is reading. Threads are registered automatically on their
// first call and unregistered when they exit. Memory allocation apart: a
// record's blocks come from the store's pool (below), whose size classes
// each have a mutex held for a few loads and stores, as malloc's arenas
// have; no call waits for another call's record work.
//
// Capacity: at most `capacity` records are held at once, live or expired but
// not yet reclaimed. A Claim that needs a new record in a full store first
// reclaims expired records, examining at most 1024 buckets per call and
// resuming where the previous sweep stopped, then fails with
// kResourceExhausted if none could be freed. After a full pass that found
// only live records, such claims fail at once, without sweeping, until the
// earliest of those records expires or a record is added or taken over. A
// claim over an expired record of the same key, or a takeover, reuses its
// slot. Expired records are otherwise reclaimed by PurgeExpired.
//
// Bytes: records are also bounded by `max_bytes`. Each record is charged
// kRecordBytes (its id, fingerprint, token, times and index entry) while it
// is held, and a completed one also ResponseBytes(response) (its status,
// headers and body, with a fixed overhead per header and per response): an
// estimate of the memory they occupy, counted exactly. The hash index (8
// bytes per bucket, allocated at Open) is not charged.
//  - A claim that needs a new record and does not fit fails with
//    kResourceExhausted ("memory store full", the Guard answers 503
//    store_full), after reclaiming expired records as for capacity.
//  - A Complete whose response does not fit, after reclaiming expired
//    records (judged by the latest `now` any claim passed), fails with
//    kResourceExhausted and leaves the record in progress: its lock still
//    holds until lock_timeout, so a duplicate gets 409 instead of running the
//    handler again while the first response is sent; the Guard counts
//    store_failed. It never releases the claim silently.
//  - A release, a purge, a reclaim, or a claim over an expired completed
//    record gives the bytes back.
// Both bounds are exact: never more than `capacity` records, never more than
// max_bytes charged, under any concurrency. Near a bound a call may find the
// store full while another thread briefly holds the slot or bytes it needs.
//
// Memory: what records keep (their entries, and a copy of each stored
// response) lives in the store's own pool, not in the process's heap
// between the blocks of the requests that made them: kept in that heap,
// records slowed every request's allocations (benchmarks/http/NOTES.md,
// "The memory store's records and malloc"). The pool has size classes of
// 64-byte steps up to 1 KiB, then quarter steps of each doubling up to 64
// KiB (1.25 KiB, 1.5, 1.75, 2, 2.5, ...; a larger response is one block of
// the process allocator). A block a record gives
// back is kept for the next record of its size class, in any memory store
// of the process: the pool does not shrink, it stays at the peak the records
// of each class reached (bounded by max_bytes, with the rounding to a class)
// until the process exits. A replay and Inspect get a response of their
// own, copied from the pool; the record shares nothing with its callers.
//
// Thread-safety: every method may be called concurrently from any number of
// threads, except the destructor, which must not run concurrently with any
// other call on the same store.

#ifndef IDEM_MEMORY_STORE_H_
#define IDEM_MEMORY_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/memory_store_options.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/store/store_boundary.h"
#include "idem/store_uri.h"
#include "idem/types.h"

namespace idem {

// Counters for monitoring and tests; each field is read separately, so the
// set is not one atomic snapshot.
struct MemoryStoreStats {
  std::size_t records = 0;    // Held now, live or expired (see size()).
  std::size_t capacity = 0;   // As configured.
  std::size_t buckets = 0;    // Hash buckets (a power of two >= capacity).
  std::size_t bytes = 0;      // Charged to the held records (see max_bytes).
  std::size_t max_bytes = 0;  // As configured.
  // The memory stores' pool ("Memory" above), shared by every memory store
  // of the process: the bytes its blocks in use take (rounded up to their
  // size classes), and the bytes it took from the process allocator, which
  // it keeps (the peak of the blocks in use, per class).
  std::size_t pool_bytes_in_use = 0;
  std::size_t pool_bytes_reserved = 0;
  // Sweeps for expired records run by claims that found the store full, the
  // buckets they examined and the records they reclaimed.
  std::uint64_t reclaim_sweeps = 0;
  std::uint64_t swept_buckets = 0;
  std::uint64_t reclaimed = 0;
  // Records deleted by PurgeExpired.
  std::uint64_t purged = 0;
};

// Open() returns the implementation; the class itself holds no state.
class MemoryStore : public StoreBoundary {
 public:
  // Largest accepted capacity (2^30 records).
  static constexpr std::size_t kMaxCapacity = std::size_t{1} << 30;
  // Accepted max_bytes: from 4 KiB (a few records) to 1 TiB.
  static constexpr std::size_t kMinMaxBytes = std::size_t{4} << 10;
  static constexpr std::size_t kMaxMaxBytes = std::size_t{1} << 40;

  // What a held record is charged, completed or not.
  static constexpr std::size_t kRecordBytes = 160;
  // What a completed record's response adds: kResponseBytes, plus for each
  // header kHeaderBytes and its name and value, plus the body.
  static constexpr std::size_t kResponseBytes = 128;
  static constexpr std::size_t kHeaderBytes = 64;
  static std::size_t ResponseBytes(const Response& response);

  // Creates an empty store.
  // Errors: kInvalidArgument when options.capacity is 0 or above
  // kMaxCapacity, or options.max_bytes is outside [kMinMaxBytes,
  // kMaxMaxBytes]; kResourceExhausted when the index cannot be allocated.
  static Result<std::unique_ptr<MemoryStore>> Open(
      const MemoryStoreOptions& options);

  // Creates a store from a parsed `memory:` URI, as OpenStore does. Takes the
  // `capacity` parameter (an integer in [1, kMaxCapacity]) and `max_bytes`
  // (an integer in [kMinMaxBytes, kMaxMaxBytes]) from `uri`.
  // Errors: kInvalidArgument naming the URI when the scheme is not "memory",
  // when anything follows "memory:" besides the query, when `capacity` or
  // `max_bytes` is not a valid number in range (the message names it), or
  // when another parameter is present (Open judges the numbers; the message
  // names the URI). `options` is accepted for uniformity; the memory store
  // needs no clock.
  static Result<std::unique_ptr<Store>> OpenFromUri(
      StoreUri& uri, const StoreOptions& options);

  // Frees every record. Must not run concurrently with any other call on
  // this store; records other threads retired earlier are freed by the
  // reclamation scheme, independently of the store's lifetime.
  ~MemoryStore() override = default;

  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  // {"memory", durable = false, shared_across_processes = false,
  // calls_may_block = false}.
  StoreInfo Info() const override = 0;

  // Records held now, live or expired but not yet reclaimed. Exact when no
  // call is running; approximate (by the calls in flight) otherwise.
  virtual std::size_t size() const = 0;
  virtual std::size_t capacity() const = 0;
  virtual std::size_t max_bytes() const = 0;
  // Bytes charged to the held records; exact when no call is running,
  // approximate (by the calls in flight) otherwise, never above max_bytes.
  virtual std::size_t bytes() const = 0;
  virtual MemoryStoreStats stats() const = 0;

 protected:
  MemoryStore() : StoreBoundary("memory store") {}

  // The Store operations (store.h), each called through StoreBoundary
  // (idem/store/store_boundary.h: argument checks, exceptions as errors:
  // kResourceExhausted when out of memory).
  // The claim table of store.h, atomically per id (a single CAS publishes the
  // new record). A new record needs a free slot; when there is none the call
  // reclaims expired records first.
  // Errors: kInvalidArgument when ttl or lock_timeout is not positive;
  // kResourceExhausted ("memory store full: ...") when the store holds
  // `capacity` records, or a new record would take the bytes charged above
  // max_bytes, and none of those examined had expired, or when memory
  // allocation fails. Near capacity the answer is approximate in the safe
  // direction, since a claim never waits for another: claims racing to
  // insert new ids hold their slots for an instant before publishing, only
  // one claim sweeps at a time, and free slots move between per-thread
  // stripes and a shared count, so a claim may find the store full while a
  // slot is about to be given back. The bound itself is exact.
  Result<ClaimResult> DoClaim(const RecordId& id, const Fingerprint& fp,
                              TimePoint now, Duration ttl,
                              Duration lock_timeout) override = 0;

  // Returns true after storing a copy of `response` and marking the record
  // completed (same expires_at) if it is in_progress with `token`; false,
  // changing nothing, otherwise. Concurrent calls with the same token: at
  // most one returns true. Error: kResourceExhausted when out of memory, or
  // ("memory store full: ...") when the response would take the bytes
  // charged above max_bytes: the record is then left in progress, unchanged.
  Result<bool> DoComplete(const RecordId& id, const Token& token,
                          const Response& response) override = 0;
  // As Complete: the store keeps a copy of `response` in its pool, not the
  // caller's object. kInvalidArgument when it is null.
  Result<bool> DoCompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const Response> response) override = 0;

  // Deletes the record and frees its slot if it is in_progress with `token`;
  // returns whether it did. Concurrent Complete/Release calls with the same
  // token: at most one returns true. Error: kResourceExhausted when out of
  // memory.
  Result<bool> DoRelease(const RecordId& id, const Token& token) override = 0;

  // Deletes the record of `id` whatever its state and frees its slot;
  // returns whether there was one. One CAS publishes the removal, so a
  // concurrent Complete or Release of the revoked claim returns false.
  // Error: kResourceExhausted when out of memory.
  Result<bool> DoRevoke(const RecordId& id) override = 0;

  // A copy of the record of `id` (with a copy of its response), or nullopt
  // when there is none or it has expired at `now`. The copy is one
  // consistent version of the record, never a mix of two. Never fails except
  // for kResourceExhausted when out of memory.
  Result<std::optional<Record>> DoInspect(const RecordId& id,
                                          TimePoint now) override = 0;

  // Deletes up to `limit` records with expires_at <= now, examining each
  // bucket at most once per call (successive calls resume where the last
  // one stopped); returns how many it deleted. Safe alongside claims: a
  // record claimed again at the same moment is either purged first or
  // replaced, never both. Error: kResourceExhausted when out of memory.
  Result<std::size_t> DoPurgeExpired(TimePoint now,
                                     std::size_t limit) override = 0;
};

}  // namespace idem

#endif  // IDEM_MEMORY_STORE_H_
