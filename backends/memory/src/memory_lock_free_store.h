// The implementation of MemoryStore (memory_store.h): buckets of immutable
// chains (memory_bucket_table.h, memory_chain.h) changed by one CAS each,
// memory reclaimed with hazard pointers (memory_hazard.h), bounded by two
// striped budgets (memory_striped_budget.h): record slots and bytes.

#ifndef IDEM_BACKENDS_MEMORY_LOCK_FREE_STORE_H_
#define IDEM_BACKENDS_MEMORY_LOCK_FREE_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "idem/memory_store.h"
#include "memory_bucket_table.h"
#include "memory_chain.h"
#include "memory_striped_budget.h"

namespace idem::memory_internal {

class LockFreeStore final : public MemoryStore {
 public:
  // Throws std::bad_alloc when the buckets cannot be allocated.
  LockFreeStore(const MemoryStoreOptions& options, std::size_t bucket_count);
  ~LockFreeStore() override;

  StoreInfo Info() const override;

  std::size_t size() const override { return slots_.used(); }
  std::size_t capacity() const override { return slots_.limit(); }
  std::size_t max_bytes() const override { return bytes_.limit(); }
  std::size_t bytes() const override { return bytes_.used(); }
  MemoryStoreStats stats() const override;

 protected:
  Result<ClaimResult> DoClaim(const RecordId& id, const Fingerprint& fp,
                              TimePoint now, Duration ttl,
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
  struct SweepResult {
    std::size_t removed = 0;
    std::size_t kept = 0;  // Records left in the bucket.
    TimePoint min_kept_expiry = TimePoint::max();
  };

  // What unlinking `record` gives back.
  static std::size_t ChargedBytes(const Entry& entry);

  Error Full() const;

  // What ChangeRecord does with the record it found: with `publish`,
  // publishes `next` (a new chain: Chain::WithReplaced, or WithRemoved,
  // null when the bucket empties) in place of the chain it read; without,
  // reads the bucket again (`again`) or stops, returning `stop` (false, or
  // an error).
  struct Change {
    bool publish = false;
    Chain* next = nullptr;
    bool again = false;
    Result<bool> stop = false;
  };
  // The read-copy-publish loop of every call that changes one existing
  // record (Complete, Release, Revoke, ExtendLock): reads the chain of
  // `id`'s bucket, returns false when `id` is not in it, else calls
  // `change(chain, index, entry)` and publishes its chain with one CAS,
  // from a fresh read when another call published first. Returns true once
  // its chain is published; `change` may run several times.
  template <typename ChangeFn>
  Result<bool> ChangeRecord(const RecordId& id, ChangeFn change);
  // Removes the one entry `id` if `removes(record)` says so, giving back its
  // slot and bytes; returns whether it did.
  template <typename Pred>
  bool RemoveIf(const RecordId& id, Pred removes);

  Result<ClaimResult> ClaimImpl(const RecordId& id, const Fingerprint& fp,
                                TimePoint now, Duration ttl,
                                Duration lock_timeout);
  Result<bool> CompleteImpl(const RecordId& id, const Token& token,
                            const Response& response);

  // Reclaiming expired records (memory_sweep.cc).
  // The latest `now` a claim passed (for a Complete that reclaims).
  TimePoint LatestNow() const;
  void NoteNow(TimePoint now);
  void BumpGeneration();
  std::uint64_t GenerationSum() const;
  // Called by a claim that found no free slot.
  void ReclaimForClaim(TimePoint now);
  SweepResult SweepBucket(std::atomic<Chain*>& bucket, TimePoint now,
                          std::size_t limit);
  std::size_t PurgeImpl(TimePoint now, std::size_t limit);

  // Each bucket points to an immutable chain of the records hashed to it
  // (null when empty); every change publishes a new chain with one CAS.
  BucketTable buckets_;
  // Held records (records <= slots_.used() <= capacity) and their charges.
  StripedBudget slots_;
  StripedBudget bytes_;

  struct alignas(64) Stripe {
    // Bumped after a record with a new expiry (insert, takeover, reuse of
    // an expired record) is published by a thread of this stripe; the sum
    // over stripes only grows, which is what a sweep checks.
    std::atomic<std::uint64_t> generation{0};
    // The latest `now` passed by a claim of a thread of this stripe, in ns
    // since the epoch (a plain max; racing writers may keep a smaller one).
    std::atomic<std::int64_t> latest_now_ns{0};
  };
  Stripe stripes_[kStripes];

  // Held (try-lock, never waited on) by the one claim that sweeps for
  // expired records at a time; guards the sweep_ state below.
  alignas(64) std::atomic<bool> sweeping_{false};
  struct SweepState {
    std::size_t next_bucket = 0;
    // The sweep cycle in progress: all buckets examined once while the
    // generation sum stayed equal to `generation`.
    std::uint64_t generation = 0;
    std::size_t buckets_examined = 0;
    TimePoint min_expiry = TimePoint::max();
    // Set by a completed cycle that found only live records: no record
    // expires before `until` as long as the generation sum is still `gen`,
    // so claims skip sweeping until then.
    bool hint_valid = false;
    std::uint64_t hint_gen = 0;
    TimePoint hint_until;
  } sweep_;

  std::atomic<std::size_t> purge_next_bucket_{0};

  std::atomic<std::uint64_t> reclaim_sweeps_{0};
  std::atomic<std::uint64_t> swept_buckets_{0};
  std::atomic<std::uint64_t> reclaimed_{0};
  std::atomic<std::uint64_t> purged_{0};
};

}  // namespace idem::memory_internal

#endif  // IDEM_BACKENDS_MEMORY_LOCK_FREE_STORE_H_
