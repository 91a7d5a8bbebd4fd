// LocalCacheStore::Table (local_cache_table.h): the sharded LRU of
// completed records.

#include "local_cache_table.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace idem {

LocalCacheStore::Table::Table(std::size_t max_records, std::size_t max_bytes,
                              Metrics* metrics)
    : metrics_(metrics) {
  // A power of two of shards of at least kMinShardRecords each: a small
  // cache stays one exact LRU, and no shard is so small that two hot ids
  // evict each other.
  const std::size_t shard_count = std::min(
      kMaxShards,
      std::bit_floor(std::max<std::size_t>(max_records / kMinShardRecords, 1)));
  shards_ = std::vector<Shard>(shard_count);
  shard_mask_ = shard_count - 1;
  for (std::size_t i = 0; i < shard_count; ++i) {
    // Spread the remainder so that the shards add up to max_records.
    shards_[i].max_records =
        max_records / shard_count + (i < max_records % shard_count ? 1 : 0);
    shards_[i].max_bytes = std::max<std::size_t>(max_bytes / shard_count, 1);
  }
}

std::size_t LocalCacheStore::Table::Charge(const Record& record) {
  // The entry, its list node and map slot, the Response object: a fixed
  // overhead, then what the response holds.
  std::size_t bytes = 256;
  if (record.response != nullptr) {
    bytes += record.response->body.size();
    for (const auto& [name, value] : record.response->headers) {
      bytes += name.size() + value.size() + 64;
    }
  }
  return bytes;
}

void LocalCacheStore::Table::Erase(Shard& shard,
                                   std::list<Entry>::iterator it) {
  shard.bytes -= it->bytes;
  shard.map.erase(it->id);
  shard.lru.erase(it);
}

LocalCacheStore::Table::Lookup LocalCacheStore::Table::Find(
    const RecordId& id, const Fingerprint& fp, TimePoint now,
    TimePoint clock_now, bool count_miss) {
  Shard& shard = ShardOf(id);
  Lookup out;
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    out.epoch = EpochOf(shard, id);
    auto found = shard.map.find(id);
    if (found != shard.map.end()) {
      auto it = found->second;
      const TimePoint purged{
          Duration(purged_until_.load(std::memory_order_acquire))};
      std::optional<ClaimResult> answer;
      if (clock_now < it->fresh_until && it->record.expires_at > purged) {
        // Exactly the store's decision for this record: kCompleted with its
        // response, kMismatch, or nullopt once it has expired at `now`.
        answer = ClaimBlockedBy(it->record, fp, now);
      }
      if (answer) {
        shard.lru.splice(shard.lru.begin(), shard.lru, it);
        out.answer = std::move(answer);
      } else {
        Erase(shard, it);
      }
    }
  }
  if (!out.answer && !count_miss) return out;
  (out.answer ? hits_ : misses_).fetch_add(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) {
    metrics_->Count(out.answer ? CountedEvent::kLocalCacheHit
                               : CountedEvent::kLocalCacheMiss);
  }
  return out;
}

std::uint64_t LocalCacheStore::Table::Epoch(const RecordId& id) {
  Shard& shard = ShardOf(id);
  std::lock_guard<std::mutex> lock(shard.mu);
  return EpochOf(shard, id);
}

void LocalCacheStore::Table::Insert(const RecordId& id, Record record,
                                    TimePoint fresh_until,
                                    std::uint64_t epoch) {
  Shard& shard = ShardOf(id);
  const std::size_t bytes = Charge(record);
  if (bytes > shard.max_bytes) return;  // Would evict the whole shard.
  std::uint64_t evicted = 0;
  {
    std::lock_guard<std::mutex> lock(shard.mu);
    if (EpochOf(shard, id) != epoch) return;  // Invalidated meanwhile.
    if (auto found = shard.map.find(id); found != shard.map.end()) {
      Erase(shard, found->second);
    }
    while (!shard.lru.empty() && (shard.map.size() >= shard.max_records ||
                                  shard.bytes + bytes > shard.max_bytes)) {
      Erase(shard, std::prev(shard.lru.end()));
      ++evicted;
    }
    shard.lru.push_front(Entry{.id = id,
                               .record = std::move(record),
                               .fresh_until = fresh_until,
                               .bytes = bytes});
    try {
      shard.map.emplace(id, shard.lru.begin());
    } catch (...) {
      shard.lru.pop_front();  // The list and the map stay one table.
      throw;
    }
    shard.bytes += bytes;
  }
  fills_.fetch_add(1, std::memory_order_relaxed);
  if (evicted != 0) {
    evictions_.fetch_add(evicted, std::memory_order_relaxed);
    if (metrics_ != nullptr) {
      metrics_->Count(CountedEvent::kLocalCacheEviction, evicted);
    }
  }
}

void LocalCacheStore::Table::Invalidate(const RecordId& id) {
  Shard& shard = ShardOf(id);
  std::lock_guard<std::mutex> lock(shard.mu);
  ++EpochOf(shard, id);
  if (auto found = shard.map.find(id); found != shard.map.end()) {
    Erase(shard, found->second);
  }
}

void LocalCacheStore::Table::Purged(TimePoint now) {
  const std::int64_t ns = now.time_since_epoch().count();
  std::int64_t seen = purged_until_.load(std::memory_order_relaxed);
  while (seen < ns && !purged_until_.compare_exchange_weak(
                          seen, ns, std::memory_order_acq_rel)) {
  }
}

LocalCacheCounters LocalCacheStore::Table::counters() const {
  return {.hits = hits_.load(std::memory_order_relaxed),
          .misses = misses_.load(std::memory_order_relaxed),
          .fills = fills_.load(std::memory_order_relaxed),
          .evictions = evictions_.load(std::memory_order_relaxed)};
}

std::size_t LocalCacheStore::Table::size() const {
  std::size_t n = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    n += shard.map.size();
  }
  return n;
}

}  // namespace idem
