// The state behind RocksdbStore (rocksdb_store.h): the database, the id
// stripe mutexes, the background-error gate, the purge cursor. The record
// operations are in rocksdb_store.cc, the purge scan in rocksdb_purge.cc.

#ifndef IDEM_BACKENDS_ROCKSDB_ROCKSDB_IMPL_H_
#define IDEM_BACKENDS_ROCKSDB_ROCKSDB_IMPL_H_

#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/rocksdb_store.h"
#include "rocksdb_background_errors.h"
#include "rocksdb_expiry_filter.h"

namespace idem {

struct RocksdbStore::Impl {
  // Enough stripes that unrelated ids rarely share one at any realistic
  // thread count; each is a cache line, so the table costs 64 KiB per store.
  static constexpr std::size_t kStripes = 1024;

  struct alignas(64) Stripe {
    std::mutex mu;
  };

  // What a read-modify-write decided to write.
  struct Write {
    enum class Kind { kNone, kPut, kDelete };
    Kind kind = Kind::kNone;
    std::string value;
  };

  std::string path;
  std::shared_ptr<Clock> clock;
  // Referenced by the column family options: must outlive `db`.
  std::unique_ptr<rocksdb_internal::ExpiryFilter> filter;
  rocksdb::DB* db = nullptr;
  rocksdb::ColumnFamilyHandle* default_cf = nullptr;
  rocksdb::ColumnFamilyHandle* cf = nullptr;
  rocksdb::WriteOptions write_options;
  rocksdb::ReadOptions read_options;
  // For reads on a caller's thread (BlockedClaim): answered from the
  // memtables and the block cache, or Incomplete where a table file would
  // have to be read.
  rocksdb::ReadOptions memory_read_options = [] {
    rocksdb::ReadOptions options;
    options.read_tier = rocksdb::kBlockCacheTier;
    return options;
  }();
  std::unique_ptr<Stripe[]> stripes{new Stripe[kStripes]};
  // Registered as a listener: stops and resumes writes around RocksDB's
  // background errors (rocksdb_background_errors.h).
  std::shared_ptr<rocksdb_internal::BackgroundErrors> background_errors =
      std::make_shared<rocksdb_internal::BackgroundErrors>();

  std::mutex purge_mu;
  // The key the next PurgeExpired scan starts at ("" = the first key).
  std::string purge_cursor;

  ~Impl() { Close(); }
  // Flushes the record column family and closes the database.
  void Close();

  std::size_t StripeIndex(const RecordId& id) const {
    return id.Prefix64() % kStripes;
  }

  // Before every write: nullopt when it may be issued, else the
  // kUnavailable error to return instead of issuing it (a background error
  // stops writes until DB::Resume() clears it; rocksdb_background_errors.h).
  std::optional<Error> WritesStopped(std::string_view op);
  // DecodeRecord, failing with kDataLoss naming the store and the id.
  Result<Record> Decode(const RecordId& id, std::string_view value) const;
  // The record `current` holds when `token` holds it (in progress under
  // it); nullopt when there is none or it is not held by `token`.
  Result<std::optional<Record>> HeldRecord(
      const RecordId& id, std::optional<std::string_view> current,
      const Token& token) const;

  // Reads the value of `id`, lets `decide` compute the result and the write,
  // and applies the write, all while no other read-modify-write of `id` can
  // run. `decide` gets the current value (nullopt when there is none).
  template <typename T, typename Fn>
  Result<T> Update(const RecordId& id, std::string_view op, Fn&& decide);

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl, Duration lock_timeout);
  // Claim's answer when the record of `id` blocks the claim (ClaimBlockedBy:
  // a replay, a mismatch, a claim in progress), decided from one read
  // without the stripe lock, without writing and without reading a table
  // file (memory_read_options); nullopt when Claim has to decide (no
  // record, an expired one, a timed-out lock, or one that is not in
  // memory). A record that blocks a claim changes only by a write, which
  // the read sees entirely or not at all, so the answer is the one Claim
  // would have given at the moment of the read. Errors: Claim's.
  Result<std::optional<ClaimResult>> BlockedClaim(const RecordId& id,
                                                  const Fingerprint& fp,
                                                  TimePoint now);
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response);
  Result<bool> Release(const RecordId& id, const Token& token);
  Result<bool> Revoke(const RecordId& id);
  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout);
  Result<std::optional<Record>> Inspect(const RecordId& id, TimePoint now);
  // rocksdb_stats.cc.
  Result<std::optional<StoreStats>> Stats(TimePoint now);

  // rocksdb_purge.cc.
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit);
  Result<std::size_t> DeleteExpired(const std::vector<std::string>& keys,
                                    TimePoint now);
};

}  // namespace idem

#endif  // IDEM_BACKENDS_ROCKSDB_ROCKSDB_IMPL_H_
