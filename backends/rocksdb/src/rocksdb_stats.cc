// RocksdbStore::Stats: one pass over the record column family, decoding
// every value. It reads the whole store, as an operator's tool may; the
// iterator is a consistent snapshot and takes no stripe lock, so claims go
// on meanwhile.

#include <memory>

#include <rocksdb/iterator.h>

#include "idem/store/record_codec.h"
#include "rocksdb_call.h"
#include "rocksdb_impl.h"
#include "rocksdb_options.h"

namespace idem {

using rocksdb_internal::RocksdbCall;
using rocksdb_internal::StatusError;
using rocksdb_internal::View;

Result<std::optional<StoreStats>> RocksdbStore::Impl::Stats(TimePoint now) {
  const rocksdb::ReadOptions scan_options = rocksdb_internal::ScanOptions();
  std::unique_ptr<rocksdb::Iterator> it(
      RocksdbCall([&] { return db->NewIterator(scan_options, cf); }));
  StoreStats stats;
  for (RocksdbCall([&] { it->SeekToFirst(); }); it->Valid();
       RocksdbCall([&] { it->Next(); })) {
    // Expiry by the header alone, as the purge judges it: an expired record
    // whose body is damaged is expired (the purge deletes it), not damaged.
    const std::string_view value = View(it->value());
    const std::optional<TimePoint> expires_at = PeekExpiresAt(value);
    if (expires_at && *expires_at <= now) {
      ++stats.expired;
      continue;
    }
    const Result<Record> record = DecodeRecord(value);
    if (!record) {
      ++stats.damaged;
      continue;
    }
    stats.Count(record->state, record->expires_at, now);
  }
  if (!it->status().ok()) {
    return tl::unexpected(StatusError(path, "stats", it->status()));
  }
  return std::optional<StoreStats>(stats);
}

}  // namespace idem
