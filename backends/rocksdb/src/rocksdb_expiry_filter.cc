#include "rocksdb_expiry_filter.h"

#include <optional>

#include "idem/store/record_codec.h"
#include "rocksdb_call.h"

namespace idem::rocksdb_internal {

bool ExpiredAt(std::string_view value, TimePoint now) {
  const std::optional<TimePoint> expires_at = PeekExpiresAt(value);
  return expires_at.has_value() && *expires_at <= now;
}

bool ExpiryFilter::Filter(int /*level*/, const rocksdb::Slice& /*key*/,
                          const rocksdb::Slice& value,
                          std::string* /*new_value*/,
                          bool* /*value_changed*/) const {
  return ExpiredAt(View(value), clock_->Now());
}

}  // namespace idem::rocksdb_internal
