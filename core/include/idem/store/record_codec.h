// The versioned binary form of a Record, shared by every byte-oriented
// backend (RocksDB, SQLite blobs, PostgreSQL bytea).
//
// Layout, version 1. Integers are little-endian; times are signed
// nanoseconds since the Unix epoch.
//
//   offset  size  field
//        0     1  magic 0x49 ('I')
//        1     1  version, 1
//        2     1  state: 1 = in_progress, 2 = completed
//        3    32  fingerprint
//       35    16  token
//       51     8  i64 locked_until
//       59     8  i64 expires_at
//       67        completed records only, the response:
//                   u16 status (100..999)
//                   u32 header count
//                   per header: u32 name length, name, u32 value length, value
//                   u64 body length, body
//      n-4     4  u32 CRC-32C (Castagnoli) of bytes [0, n-4)
//
// An in_progress record is therefore exactly 71 bytes. Decoding accepts
// exactly this layout: a record that is truncated, has trailing bytes, a bad
// checksum, an unknown magic, version or state, an in_progress record with a
// response section, a status outside 100..999, or lengths that run past the
// end decodes to kDataLoss with a message saying which. Decoding never reads
// out of bounds and allocates at most a small multiple of the input size.
// Messages never contain record contents.
//
// A new layout gets a new version byte; DecodeRecord keeps reading old
// versions.
//
// Thread-safety: pure functions.

#ifndef IDEM_STORE_RECORD_CODEC_H_
#define IDEM_STORE_RECORD_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "idem/error.h"
#include "idem/record.h"
#include "idem/types.h"

namespace idem {

inline constexpr std::uint8_t kRecordCodecMagic = 0x49;
inline constexpr std::uint8_t kRecordCodecVersion = 1;

// Encodes `record` in the current version. The status of a completed
// record's response must be in 100..999 (the Guard only stores such
// responses; debug builds assert it). A completed record without a response
// encodes an empty 200 response. The response of an in_progress record is
// not encoded. Header names and values must be shorter than 4 GiB each.
std::string EncodeRecord(const Record& record);

// The encoding of `held` (an in_progress record) completed with `response`:
// the form every store's Complete writes. `response` is encoded, not copied.
std::string EncodeCompleted(const Record& held, const Response& response);

// Errors: kDataLoss for anything that is not a valid encoding.
Result<Record> DecodeRecord(std::string_view bytes);

// expires_at of an encoded record read from its fixed header, without
// decoding or checksumming the rest: for scans that only need the expiry
// (compaction filters, purges). nullopt when `bytes` is too short or not of
// a known magic and version; such values are left for DecodeRecord to report.
std::optional<TimePoint> PeekExpiresAt(std::string_view bytes);

// The columns a SQL backend keeps beside a record's encoding, so that SQL can
// decide claims and purges: state as its integer value, fingerprint and token
// as their bytes, times as ToUnixNanos.
struct RecordColumns {
  std::int64_t state = 0;
  std::string_view fingerprint;
  std::string_view token;
  std::int64_t locked_until = 0;
  std::int64_t expires_at = 0;
};

// Decodes the record stored for `id` and checks that its state, fingerprint,
// token, locked_until and expires_at equal `columns`. Errors: kDataLoss when
// `encoded` does not decode ("record <id hex> does not decode: ...") or
// disagrees with the columns ("record <id hex> disagrees with its columns").
Result<Record> DecodeRecordWithColumns(const RecordId& id,
                                       std::string_view encoded,
                                       const RecordColumns& columns);

}  // namespace idem

#endif  // IDEM_STORE_RECORD_CODEC_H_
