// Expiry as the RocksDB store's background paths judge it: the compaction
// filter and the purge scan read expires_at from the record codec's fixed
// header (PeekExpiresAt) without decoding or checksumming the rest. A value
// whose header does not read is never judged expired, so corruption stays
// visible as kDataLoss instead of silently becoming a missing record; an
// expired record goes even if its body is damaged (it has no use left).

#ifndef IDEM_BACKENDS_ROCKSDB_EXPIRY_FILTER_H_
#define IDEM_BACKENDS_ROCKSDB_EXPIRY_FILTER_H_

#include <rocksdb/compaction_filter.h>
#include <rocksdb/slice.h>

#include <memory>
#include <string>
#include <string_view>

#include "idem/clock.h"

namespace idem::rocksdb_internal {

// Whether the encoded record `value` has expired at `now`; false when its
// header does not read.
bool ExpiredAt(std::string_view value, TimePoint now);

// Drops the records that have expired by `clock` as compactions rewrite them.
class ExpiryFilter final : public rocksdb::CompactionFilter {
 public:
  explicit ExpiryFilter(std::shared_ptr<Clock> clock)
      : clock_(std::move(clock)) {}

  bool Filter(int level, const rocksdb::Slice& key, const rocksdb::Slice& value,
              std::string* new_value, bool* value_changed) const override;
  const char* Name() const override { return "idem.ExpiryFilter"; }

 private:
  const std::shared_ptr<Clock> clock_;
};

}  // namespace idem::rocksdb_internal

#endif  // IDEM_BACKENDS_ROCKSDB_EXPIRY_FILTER_H_
