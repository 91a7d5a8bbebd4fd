#include "baseline/sharded_mutex_store.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "idem/token.h"

namespace idem::bench {
namespace {

static_assert(ShardedMutexStore::kShards == 64,
              "ShardFor takes the top 6 bits of the id");

}  // namespace

ShardedMutexStore::ShardedMutexStore(std::size_t expected_records)
    : StoreBoundary("sharded mutex store") {
  if (expected_records == 0) return;
  // Headroom for the uneven spread of hashed ids over the shards.
  const std::size_t per_shard = expected_records / kShards * 9 / 8 + 16;
  for (Shard& shard : shards_) shard.records.reserve(per_shard);
}

Result<ClaimResult> ShardedMutexStore::DoClaim(const RecordId& id,
                                               const Fingerprint& fp,
                                               TimePoint now, Duration ttl,
                                               Duration lock_timeout) {
  Shard& shard = ShardFor(id);
  ClaimResult result;
  std::lock_guard<std::mutex> lock(shard.mu);
  auto [it, inserted] = shard.records.try_emplace(id);
  Record& record = it->second;
  // An expired record is treated exactly like a missing one, including for
  // the fingerprint check, and is overwritten in place.
  if (!inserted) {
    if (auto blocked = ClaimBlockedBy(record, fp, now)) return *blocked;
    result.takeover = !record.Expired(now);
  }
  record = NewClaimRecord(fp, now, ttl, lock_timeout);
  result.outcome = ClaimOutcome::kAcquired;
  result.token = record.token;
  result.locked_until = record.locked_until;
  return result;
}

Result<bool> ShardedMutexStore::DoComplete(const RecordId& id,
                                           const Token& token,
                                           const Response& response) {
  // Copy the response before locking so the shard is not held for the length
  // of a body copy; a Complete that fails is rare enough to waste it.
  return DoCompleteShared(id, token,
                          std::make_shared<const Response>(response));
}

Result<bool> ShardedMutexStore::DoCompleteShared(
    const RecordId& id, const Token& token,
    std::shared_ptr<const Response> stored) {
  Shard& shard = ShardFor(id);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.records.find(id);
  if (it == shard.records.end()) return false;
  Record& record = it->second;
  if (record.state != RecordState::kInProgress || record.token != token) {
    return false;
  }
  record.state = RecordState::kCompleted;
  record.response = std::move(stored);
  return true;
}

Result<bool> ShardedMutexStore::DoRelease(const RecordId& id,
                                          const Token& token) {
  Shard& shard = ShardFor(id);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.records.find(id);
  if (it == shard.records.end()) return false;
  const Record& record = it->second;
  if (record.state != RecordState::kInProgress || record.token != token) {
    return false;
  }
  shard.records.erase(it);
  return true;
}

Result<bool> ShardedMutexStore::DoRevoke(const RecordId& id) {
  Shard& shard = ShardFor(id);
  std::lock_guard<std::mutex> lock(shard.mu);
  return shard.records.erase(id) == 1;
}

Result<bool> ShardedMutexStore::DoExtendLock(const RecordId& id,
                                             const Token& token, TimePoint now,
                                             Duration lock_timeout) {
  Shard& shard = ShardFor(id);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.records.find(id);
  if (it == shard.records.end()) return false;
  const std::optional<TimePoint> until =
      RenewedLockUntil(it->second, token, now, lock_timeout);
  if (!until) return false;
  it->second.locked_until = *until;
  return true;
}

Result<std::optional<StoreStats>> ShardedMutexStore::DoStats(TimePoint now) {
  StoreStats stats;
  for (Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    for (const auto& [id, record] : shard.records) {
      stats.Count(record.state, record.expires_at, now);
    }
  }
  return std::optional<StoreStats>(stats);
}

Result<std::optional<Record>> ShardedMutexStore::DoInspect(const RecordId& id,
                                                           TimePoint now) {
  Shard& shard = ShardFor(id);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.records.find(id);
  if (it == shard.records.end() || it->second.Expired(now)) {
    return std::optional<Record>();
  }
  return std::optional<Record>(it->second);
}

Result<std::size_t> ShardedMutexStore::DoPurgeExpired(TimePoint now,
                                                      std::size_t limit) {
  std::size_t purged = 0;
  for (Shard& shard : shards_) {
    if (purged >= limit) break;
    std::lock_guard<std::mutex> lock(shard.mu);
    for (auto it = shard.records.begin();
         it != shard.records.end() && purged < limit;) {
      if (it->second.Expired(now)) {
        it = shard.records.erase(it);
        ++purged;
      } else {
        ++it;
      }
    }
  }
  return purged;
}

StoreInfo ShardedMutexStore::Info() const {
  return StoreInfo{.name = "sharded_mutex",
                   .durable = false,
                   .shared_across_processes = false,
                   .calls_may_block = false};
}

std::size_t ShardedMutexStore::SizeForTesting() const {
  std::size_t n = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mu);
    n += shard.records.size();
  }
  return n;
}

}  // namespace idem::bench
