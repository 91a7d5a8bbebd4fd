// How a record lives in its Redis string value: the core's EncodeRecord
// bytes (record_codec.h), followed for a completed record by the 16-byte id
// of the Complete call that wrote it; the key's TTL; and the value read
// back, checked.
//
// The scripts (redis_scripts.cc) read the fixed header only: the state at
// byte 2, the token at 35..50, and the whole header 0..66 for
// compare-and-set. Every time decision is made here, in C++, on exact
// nanoseconds.
//
// Thread-safety: pure functions.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_RECORD_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_RECORD_H_

#include <cstddef>
#include <string>
#include <string_view>

#include <optional>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/record.h"
#include "idem/types.h"
#include "redis_connection.h"

namespace idem::redis {

// Where EncodeRecord writes the state (record_codec.h).
inline constexpr std::size_t kStateOffset = 2;
// The record codec's fixed header (magic through expires_at): what the
// scripts compare and GETRANGE key 0 66 returns.
inline constexpr std::size_t kHeaderSize = 67;
// What a scan reads of each value (GETRANGE key 0 70): the header and the
// four bytes every record has after it, so that PeekExpiresAt, which asks
// for a whole smallest record, reads the expiry.
inline constexpr std::size_t kHeadSize = 71;
// The Complete call's id after a completed record.
inline constexpr std::size_t kCallIdSize = 16;

// The PX argument for a record expiring at `expires_at` as of `now`: whole
// milliseconds rounded up, at least 1; "0" (no TTL) beyond ten years.
std::string TtlMs(TimePoint now, TimePoint expires_at);

// What the scripts compare: the value's fixed header.
inline std::string_view Header(std::string_view value) {
  return value.substr(0, kHeaderSize);
}

// The scripts and DEL return integers; anything else is a bug, and never
// counts as "done" (-1).
inline long long IntegerReply(const redisReply& r) {
  return r.type == REDIS_REPLY_INTEGER ? r.integer : -1;
}

// A GET or SET ... GET reply: the value, or nullopt for nil. Errors:
// kInternal for another type ("<display>: unexpected reply to GET").
Result<std::optional<std::string>> ValueOf(const redisReply& r,
                                           std::string_view display);

// kDataLoss for the record of `id`: "<display>: the record of id <hex>
// <what>".
Error DataLoss(const RecordId& id, std::string_view display,
               std::string_view what);

// `reply`, but a kDataLoss error (-WRONGTYPE: a key of another type under
// a record's name, such as a hash of the layout before string values)
// becomes damage named by the record's id.
Result<Reply> OfRecord(const RecordId& id, std::string_view display,
                       Result<Reply> reply);

// The record of `id` from its value: a completed record's call id (its last
// kCallIdSize bytes) is stripped, then the rest decoded. Errors: kDataLoss
// when it does not decode (short, bad magic, bad checksum, a completed
// record without its call id...).
Result<Record> DecodeValue(const RecordId& id, std::string_view display,
                           std::string_view value);

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_RECORD_H_
