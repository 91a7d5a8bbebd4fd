// The table behind LocalCacheStore (idem/store/local_cache.h): completed
// records by id, in shards of a mutex, a hash map and an LRU list each.
//
// Epochs: every id maps to an epoch slot of its shard. Invalidate (a
// revoke, a claim that acquired) bumps the id's slot and drops its entry;
// a fill takes the slot's epoch before it calls the store (Lookup returns
// it) and Insert drops the fill when the epoch has moved since, so a fill
// that read the store before an invalidation never puts its stale record
// back. Ids sharing a slot only cost each other a dropped fill.
//
// Thread-safety: every method may be called concurrently; each holds one
// shard's mutex for a hash lookup and a few list moves, no more.

#ifndef IDEM_SRC_LOCAL_CACHE_TABLE_H_
#define IDEM_SRC_LOCAL_CACHE_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "idem/clock.h"
#include "idem/metrics.h"
#include "idem/record.h"
#include "idem/store.h"
#include "idem/store/local_cache.h"
#include "idem/types.h"

namespace idem {

class LocalCacheStore::Table {
 public:
  // `max_records` >= 1 entries and about `max_bytes` >= 1 bytes in all.
  // Hits, misses and evictions are counted into `metrics` too when it is
  // not null (it must outlive the table: LocalCacheStore's options own it).
  Table(std::size_t max_records, std::size_t max_bytes, Metrics* metrics);

  struct Lookup {
    // The claim's answer from a fresh entry (kCompleted or kMismatch).
    std::optional<ClaimResult> answer;
    // Otherwise: the epoch a fill of this id must present to Insert.
    std::uint64_t epoch = 0;
  };
  // The answer for a claim of `id` with `fp` at `now` when its entry is
  // fresh at `clock_now` and not expired at `now` nor purged; a stale
  // entry is dropped. A hit is counted, and a miss too when `count_miss`
  // (a TryClaimWithoutBlocking that misses is followed by the Claim that
  // counts it).
  Lookup Find(const RecordId& id, const Fingerprint& fp, TimePoint now,
              TimePoint clock_now, bool count_miss = true);
  // The epoch a fill of `id` must present to Insert.
  std::uint64_t Epoch(const RecordId& id);
  // Keeps `record` (completed) for `id`, fresh until `fresh_until`, unless
  // `id`'s epoch is no longer `epoch`. Evicts the least recently used
  // entries of the shard for room.
  void Insert(const RecordId& id, Record record, TimePoint fresh_until,
              std::uint64_t epoch);
  // Drops `id`'s entry and bumps its epoch.
  void Invalidate(const RecordId& id);
  // Entries expired at `now` are no longer answered (PurgeExpired(now)
  // deleted their records in the store).
  void Purged(TimePoint now);

  LocalCacheCounters counters() const;
  std::size_t size() const;

 private:
  static constexpr std::size_t kMaxShards = 64;
  static constexpr std::size_t kMinShardRecords = 16;
  static constexpr std::size_t kEpochSlotsPerShard = 64;

  struct Entry {
    RecordId id;
    Record record;
    TimePoint fresh_until;
    std::size_t bytes = 0;
  };
  struct IdHash {
    // Ids are SHA-256 outputs: any 8 of their bytes are a good hash. Not
    // the first 8, which pick the shard and the epoch slot.
    std::size_t operator()(const RecordId& id) const {
      std::uint64_t v;
      std::memcpy(&v, id.bytes.data() + 8, sizeof v);
      return static_cast<std::size_t>(v);
    }
  };
  struct Shard {
    mutable std::mutex mu;
    std::list<Entry> lru;  // Most recently used first.
    std::unordered_map<RecordId, std::list<Entry>::iterator, IdHash> map;
    std::size_t bytes = 0;
    std::size_t max_records = 0;
    std::size_t max_bytes = 0;
    std::uint64_t epochs[kEpochSlotsPerShard] = {};
  };

  Shard& ShardOf(const RecordId& id) {
    return shards_[static_cast<std::size_t>(id.Prefix64()) & shard_mask_];
  }
  static std::uint64_t& EpochOf(Shard& shard, const RecordId& id) {
    return shard.epochs[(id.Prefix64() >> 32) % kEpochSlotsPerShard];
  }
  void Erase(Shard& shard, std::list<Entry>::iterator it);
  static std::size_t Charge(const Record& record);

  std::vector<Shard> shards_;
  std::size_t shard_mask_ = 0;
  // The latest `now` of a PurgeExpired through the store, in nanoseconds
  // since the epoch.
  std::atomic<std::int64_t> purged_until_{
      TimePoint::min().time_since_epoch().count()};
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, fills_{0}, evictions_{0};
  Metrics* const metrics_;
};

}  // namespace idem

#endif  // IDEM_SRC_LOCAL_CACHE_TABLE_H_
