// How a record lives in its Redis hash: the times the scripts compare, in
// whole microseconds (Lua numbers are doubles: nanoseconds would compare
// wrongly), the key's TTL, and the record read back from the fields s, f,
// t, l, e, r (redis_store.h describes them), checked against each other.
//
// Thread-safety: pure functions.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_RECORD_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_RECORD_H_

#include <hiredis/hiredis.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/record.h"
#include "idem/store.h"
#include "idem/types.h"

namespace idem::redis {

// `t` in microseconds since the epoch, rounded down (for `now`) or up (for
// deadlines: a record is never taken as expired before it is), clamped to
// what a double holds exactly.
std::int64_t FloorMicros(TimePoint t);
std::int64_t CeilMicros(TimePoint t);
TimePoint FromMicros(std::int64_t us);

// The PEXPIRE argument for a record expiring at `expires_at` as of `now`:
// whole milliseconds rounded up, at least 1; "0" (no TTL) beyond ten years.
std::string TtlMs(TimePoint now, TimePoint expires_at);

bool IsNil(const redisReply* r);

// kDataLoss for the record of `id`: "<display>: the record of id <hex>
// <what>".
Error DataLoss(const RecordId& id, std::string_view display,
               std::string_view what);

// The replies of the fields s, f, t, l, e, r, in that order.
using FieldReplies = std::array<const redisReply*, 6>;

// The record of `id` from its fields: the encoded record (r) decoded and
// checked against the fields the scripts compare. Errors: kDataLoss when a
// field is missing, the record does not decode or disagrees with a field.
Result<Record> DecodeFields(const RecordId& id, std::string_view display,
                            const FieldReplies& fields);

// Counts into `stats` the record whose fields s and e read `s` and `e` (an
// HMGET's replies) as of `now_us` (FloorMicros): nothing when both are nil
// (gone), damaged when e is not a number.
void CountFields(StoreStats& stats, const redisReply* s, const redisReply* e,
                 std::int64_t now_us);

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_RECORD_H_
