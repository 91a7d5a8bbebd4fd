// ShardedMutexStore: the simplest correct Store, for tests and benchmarks.
//
// It is the baseline the lock-free memory store must beat (benchmarks/) and a
// second, independent implementation that the store contract suite
// (tests/contract/) is proven against: a suite that passes on two stores built
// in unrelated ways checks the contract, not one implementation's habits.
//
// Records live in 64 shards, each an std::mutex over an std::unordered_map
// keyed by RecordId. Every operation locks exactly one shard except
// PurgeExpired, which visits them in turn. There is no capacity bound and no
// background work: expired records count as absent on every read and are
// deleted only by PurgeExpired or when their id is claimed again.
//
// Thread-safety: safe for concurrent use by any number of threads.

#ifndef IDEM_BENCHMARKS_BASELINE_SHARDED_MUTEX_STORE_H_
#define IDEM_BENCHMARKS_BASELINE_SHARDED_MUTEX_STORE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "idem/store.h"
#include "idem/store/store_boundary.h"

namespace idem::bench {

class ShardedMutexStore final : public StoreBoundary {
 public:
  static constexpr std::size_t kShards = 64;

  // `expected_records` pre-sizes the shards' tables (a benchmark sizes the
  // baseline like the memory store's fixed index, so neither pays for
  // growth during the timed loop). 0: grow on demand.
  explicit ShardedMutexStore(std::size_t expected_records = 0);
  ShardedMutexStore(const ShardedMutexStore&) = delete;
  ShardedMutexStore& operator=(const ShardedMutexStore&) = delete;

  StoreInfo Info() const override;

  // Records held, live or expired (expired ones linger until purged or
  // reclaimed). Not atomic across shards; for tests.
  std::size_t SizeForTesting() const;

 protected:
  // The Store calls, through StoreBoundary (store/store_boundary.h), as
  // every store's, so that the baseline pays what the stores pay.
  Result<ClaimResult> DoClaim(const RecordId& id, const Fingerprint& fp,
                              TimePoint now, Duration ttl,
                              Duration lock_timeout) override;
  Result<bool> DoComplete(const RecordId& id, const Token& token,
                          const Response& response) override;
  // Keeps `response` itself, as the memory store does.
  Result<bool> DoCompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const Response> response) override;
  Result<bool> DoRelease(const RecordId& id, const Token& token) override;
  Result<bool> DoRevoke(const RecordId& id) override;
  Result<bool> DoExtendLock(const RecordId& id, const Token& token,
                            TimePoint now, Duration lock_timeout) override;
  // Walks every shard.
  Result<std::optional<StoreStats>> DoStats(TimePoint now) override;
  Result<std::optional<Record>> DoInspect(const RecordId& id,
                                          TimePoint now) override;
  Result<std::size_t> DoPurgeExpired(TimePoint now, std::size_t limit) override;

 private:
  // Ids are SHA-256 outputs, so their first 8 bytes are already a uniform
  // hash; hashing them again would only cost time.
  struct IdHash {
    std::size_t operator()(const RecordId& id) const {
      return static_cast<std::size_t>(id.Prefix64());
    }
  };

  // Cache-line aligned so that threads working on neighbouring shards do not
  // contend on one line through the mutexes.
  struct alignas(64) Shard {
    mutable std::mutex mu;
    std::unordered_map<RecordId, Record, IdHash> records;
  };

  // The shard comes from the top bits, the bucket (prime modulus of the whole
  // prefix) mostly from the low ones, so one shard's map still spreads well.
  Shard& ShardFor(const RecordId& id) { return shards_[id.Prefix64() >> 58]; }

  std::array<Shard, kShards> shards_;
};

}  // namespace idem::bench

#endif  // IDEM_BENCHMARKS_BASELINE_SHARDED_MUTEX_STORE_H_
