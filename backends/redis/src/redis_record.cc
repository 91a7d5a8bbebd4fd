// See redis_record.h.

#include "redis_record.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "idem/store/record_codec.h"

namespace idem::redis {
namespace {

// Longer Redis TTLs are not set: such a record is meant never to expire.
constexpr std::int64_t kMaxTtlMs = std::int64_t{10} * 366 * 24 * 3600 * 1000;

}  // namespace

std::string TtlMs(TimePoint now, TimePoint expires_at) {
  const auto left = expires_at - now;
  std::int64_t ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  if (ms > kMaxTtlMs) return "0";
  return std::to_string(std::max<std::int64_t>(ms, 1));
}

Result<std::optional<std::string>> ValueOf(const redisReply& r,
                                           std::string_view display) {
  if (r.type == REDIS_REPLY_NIL) return std::optional<std::string>();
  if (r.type != REDIS_REPLY_STRING) {
    return MakeError(ErrorCode::kInternal,
                     std::string(display) + ": unexpected reply to GET");
  }
  return std::optional<std::string>(ReplyText(&r));
}

Error DataLoss(const RecordId& id, std::string_view display,
               std::string_view what) {
  return Error(ErrorCode::kDataLoss, std::string(display) +
                                         ": the record of id " + id.ToHex() +
                                         " " + std::string(what));
}

Result<Reply> OfRecord(const RecordId& id, std::string_view display,
                       Result<Reply> reply) {
  if (!reply && reply.error().code() == ErrorCode::kDataLoss) {
    return tl::unexpected(DataLoss(
        id, display,
        "is not a string value (a hash was written by an earlier version "
        "of this store): " +
            reply.error().message()));
  }
  return reply;
}

Result<Record> DecodeValue(const RecordId& id, std::string_view display,
                           std::string_view value) {
  // Only a completed record carries a call id; one too short to hold it is
  // left whole for DecodeRecord to refuse.
  if (value.size() > kStateOffset + kCallIdSize &&
      value[kStateOffset] == static_cast<char>(RecordState::kCompleted)) {
    value.remove_suffix(kCallIdSize);
  }
  auto record = DecodeRecord(value);
  if (!record) {
    return tl::unexpected(
        DataLoss(id, display, "does not decode: " + record.error().message()));
  }
  return std::move(*record);
}

}  // namespace idem::redis
