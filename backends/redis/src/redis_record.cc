// See redis_record.h.

#include "redis_record.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <string>
#include <utility>

#include "idem/record_codec.h"
#include "redis_connection.h"

namespace idem::redis {
namespace {

// Doubles hold integers exactly up to 2^53: times are clamped there
// (year 2255), which keeps every comparison in the scripts exact.
constexpr std::int64_t kMaxLuaMicros = (std::int64_t{1} << 53) - 1;
// Longer Redis TTLs are not set: such a record is meant never to expire.
constexpr std::int64_t kMaxTtlMs = std::int64_t{10} * 366 * 24 * 3600 * 1000;

std::int64_t Clamp(std::int64_t us) {
  return std::clamp(us, -kMaxLuaMicros, kMaxLuaMicros);
}

bool ParseInt64(std::string_view text, std::int64_t& out) {
  const auto [end, ec] = std::from_chars(text.begin(), text.end(), out);
  return ec == std::errc() && end == text.end() && !text.empty();
}

}  // namespace

std::int64_t FloorMicros(TimePoint t) {
  const std::int64_t ns = ToUnixNanos(t);
  std::int64_t us = ns / 1000;
  if (ns % 1000 < 0) --us;
  return Clamp(us);
}

std::int64_t CeilMicros(TimePoint t) {
  const std::int64_t ns = ToUnixNanos(t);
  std::int64_t us = ns / 1000;
  if (ns % 1000 > 0) ++us;
  return Clamp(us);
}

TimePoint FromMicros(std::int64_t us) { return FromUnixNanos(us * 1000); }

std::string TtlMs(TimePoint now, TimePoint expires_at) {
  const auto left = expires_at - now;
  std::int64_t ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  if (ms > kMaxTtlMs) return "0";
  return std::to_string(std::max<std::int64_t>(ms, 1));
}

bool IsNil(const redisReply* r) { return r->type == REDIS_REPLY_NIL; }

Error DataLoss(const RecordId& id, std::string_view display,
               std::string_view what) {
  return Error(ErrorCode::kDataLoss, std::string(display) +
                                         ": the record of id " + id.ToHex() +
                                         " " + std::string(what));
}

Result<Record> DecodeFields(const RecordId& id, std::string_view display,
                            const FieldReplies& fields) {
  const auto [s, f, t, l, e, r] = fields;
  if (std::any_of(fields.begin(), fields.end(), IsNil)) {
    return tl::unexpected(DataLoss(id, display, "is missing fields"));
  }
  auto record = DecodeRecord(ReplyText(r));
  if (!record) {
    return tl::unexpected(
        DataLoss(id, display, "does not decode: " + record.error().message()));
  }
  std::int64_t locked = 0, expires = 0;
  const bool agrees =
      ParseInt64(ReplyText(l), locked) && ParseInt64(ReplyText(e), expires) &&
      locked == CeilMicros(record->locked_until) &&
      expires == CeilMicros(record->expires_at) &&
      ReplyText(s) == std::to_string(static_cast<int>(record->state)) &&
      ReplyText(f) == record->fingerprint.view() &&
      ReplyText(t) == record->token.view();
  if (!agrees) {
    return tl::unexpected(DataLoss(id, display, "disagrees with its fields"));
  }
  return std::move(*record);
}

void CountFields(StoreStats& stats, const redisReply* s, const redisReply* e,
                 std::int64_t now_us) {
  if (IsNil(s) && IsNil(e)) return;
  std::int64_t expires = 0, state = 0;
  if (!ParseInt64(ReplyText(e), expires)) {
    ++stats.damaged;
    return;
  }
  // A state that does not parse counts as damaged unless expired.
  if (!ParseInt64(ReplyText(s), state)) state = -1;
  stats.CountRows(expires <= now_us, state, 1);
}

}  // namespace idem::redis
