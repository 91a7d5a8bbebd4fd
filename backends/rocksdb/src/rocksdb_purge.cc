// RocksdbStore::PurgeExpired: a scan of the record column family in key
// order from where the previous call stopped, deleting expired records in
// small batches with their ids' stripes held. A call that stops before the
// end leaves its iterator for the next call (rocksdb_impl.h).
//
// Why a scan budget: a scan costs about a microsecond per key, so without
// one a sweeper's call with limit 1000 over a store of ten million live
// records would read every key every interval; with kPurgeScanPerRecord it
// reads 100,000 and the next call resumes where it stopped.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>

#include "rocksdb_call.h"
#include "rocksdb_impl.h"
#include "rocksdb_options.h"

#include <rocksdb/iterator.h>
#include <rocksdb/write_batch.h>

namespace idem {
namespace {

using rocksdb_internal::ExpiredAt;
using rocksdb_internal::RocksdbCall;
using rocksdb_internal::StatusError;
using rocksdb_internal::View;

// Records PurgeExpired deletes per WriteBatch, with their stripes held: small
// enough that claims on those stripes wait for one short write (and under
// ThreadSanitizer, which tracks at most 64 locks held by one thread).
constexpr std::size_t kPurgeBatch = 32;
// Keys one PurgeExpired call examines at most, per record it may delete and
// at least.
constexpr std::size_t kPurgeScanPerRecord = 100;
constexpr std::size_t kMinPurgeScan = 100'000;

}  // namespace

// Deletes those of `keys` that are still expired at `now`, holding their
// stripes (in ascending order, so two batches never deadlock, and single-id
// calls hold one stripe only) until the batch is written.
Result<std::size_t> RocksdbStore::Impl::DeleteExpired(
    const std::vector<std::string>& keys, TimePoint now) {
  std::vector<std::size_t> indexes;
  indexes.reserve(keys.size());
  for (const std::string& key : keys) {
    RecordId id;
    id.Assign(key);
    indexes.push_back(StripeIndex(id));
  }
  std::sort(indexes.begin(), indexes.end());
  indexes.erase(std::unique(indexes.begin(), indexes.end()), indexes.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(indexes.size());
  for (std::size_t i : indexes) locks.emplace_back(stripes[i].mu);

  rocksdb::WriteBatch batch;
  std::size_t n = 0;
  for (const std::string& key : keys) {
    rocksdb::PinnableSlice value;
    const rocksdb::Status s =
        RocksdbCall([&] { return db->Get(read_options, cf, key, &value); });
    if (s.IsNotFound()) continue;
    if (!s.ok()) return tl::unexpected(StatusError(path, "purge", s));
    if (!ExpiredAt(View(value), now)) continue;
    const rocksdb::Status d =
        RocksdbCall([&] { return batch.Delete(cf, key); });
    if (!d.ok()) return tl::unexpected(StatusError(path, "purge", d));
    ++n;
  }
  if (n == 0) return n;
  if (auto stopped = WritesStopped("purge")) return tl::unexpected(*stopped);
  const rocksdb::Status s =
      RocksdbCall([&] { return db->Write(write_options, &batch); });
  if (!s.ok()) return tl::unexpected(StatusError(path, "purge", s));
  return n;
}

Result<std::size_t> RocksdbStore::Impl::PurgeExpired(TimePoint now,
                                                     std::size_t limit) {
  if (limit == 0) return std::size_t{0};
  std::lock_guard<std::mutex> purge_lock(purge_mu);
  const std::string start = purge_cursor;
  bool wrapped = start.empty();  // From the first key: one pass is all.
  // The last call's iterator stands at purge_cursor (rocksdb_impl.h).
  std::unique_ptr<rocksdb::Iterator> it = std::move(purge_iterator);
  const auto steady_now = std::chrono::steady_clock::now();
  if (it == nullptr ||
      steady_now - purge_iterator_created >= kPurgeIteratorReuse) {
    it.reset(RocksdbCall(
        [&] { return db->NewIterator(rocksdb_internal::ScanOptions(), cf); }));
    purge_iterator_created = steady_now;
    RocksdbCall([&] { it->Seek(start); });
  }
  std::size_t deleted = 0;
  std::vector<std::string> batch;
  const std::size_t scan_budget =
      limit > SIZE_MAX / kPurgeScanPerRecord
          ? SIZE_MAX
          : std::max(kMinPurgeScan, limit * kPurgeScanPerRecord);
  std::size_t examined = 0;
  bool out_of_budget = false;
  auto flush = [&]() -> Status {
    IDEM_ASSIGN_OR_RETURN(const std::size_t n, DeleteExpired(batch, now));
    deleted += n;
    batch.clear();
    return {};
  };
  while (deleted < limit) {
    if (examined >= scan_budget) {
      out_of_budget = true;
      break;
    }
    if (!it->Valid()) {
      if (!it->status().ok()) {
        return tl::unexpected(StatusError(path, "purge scan", it->status()));
      }
      if (wrapped) break;
      wrapped = true;
      RocksdbCall([&] { it->SeekToFirst(); });
      continue;
    }
    if (wrapped && !start.empty() && View(it->key()) >= start) break;
    ++examined;
    if (ExpiredAt(View(it->value()), now)) batch.emplace_back(View(it->key()));
    RocksdbCall([&] { it->Next(); });
    if (batch.size() >= std::min(kPurgeBatch, limit - deleted)) {
      IDEM_RETURN_IF_ERROR(flush());
    }
  }
  if (!batch.empty()) IDEM_RETURN_IF_ERROR(flush());
  // Resume after the last key examined; from the start after a full pass.
  if ((deleted >= limit || out_of_budget) && it->Valid()) {
    purge_cursor.assign(it->key().data(), it->key().size());
    purge_iterator = std::move(it);
  } else {
    purge_cursor.clear();
  }
  return deleted;
}

}  // namespace idem
