// The versioned binary form of a Record, shared by every byte-oriented
// backend (RocksDB, SQLite blobs, PostgreSQL bytea).
//
// Layout (version 1), all integers little-endian:
//   u8 magic 0xID ('I' = 0x49), u8 version = 1, u8 state,
//   32 B fingerprint, 16 B token, i64 locked_until_ns, i64 expires_at_ns,
//   then, for completed records only: u16 status, u32 header count,
//   per header u32 name length + name + u32 value length + value,
//   u32 body length + body; then u32 CRC32C... (see record_codec.cc)
// A record that is truncated, has trailing bytes, a bad checksum, an unknown
// version or state, or inconsistent lengths decodes to kDataLoss. Decoding
// never reads out of bounds and never allocates more than the input implies.
//
// Thread-safety: pure functions.

#ifndef IDEM_RECORD_CODEC_H_
#define IDEM_RECORD_CODEC_H_

#include <string>
#include <string_view>

#include "idem/error.h"
#include "idem/record.h"

namespace idem {

inline constexpr std::uint8_t kRecordCodecVersion = 1;

std::string EncodeRecord(const Record& record);
Result<Record> DecodeRecord(std::string_view bytes);

}  // namespace idem

#endif  // IDEM_RECORD_CODEC_H_
