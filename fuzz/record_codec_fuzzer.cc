// Fuzzes DecodeRecord with arbitrary bytes, and with the same bytes given a
// correct checksum so that the structural checks behind the CRC get explored
// too. Whatever decodes must re-encode to exactly the input (the encoding is
// canonical) and decode again to an equal record; whatever does not must be
// kDataLoss. Crashes, out-of-bounds reads and leaks are found by the
// sanitizers this target is built with.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "idem/store/record_codec.h"

namespace {

// Bit-at-a-time CRC-32C, independent of the codec's tables.
std::uint32_t Crc32c(std::string_view data) {
  std::uint32_t crc = 0xFFFFFFFF;
  for (const char ch : data) {
    crc ^= static_cast<unsigned char>(ch);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78 : 0);
  }
  return ~crc;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

void DecodeAndCheck(std::string_view bytes) {
  const auto record = idem::DecodeRecord(bytes);
  if (!record) {
    Check(record.error().code() == idem::ErrorCode::kDataLoss);
    Check(!record.error().message().empty());
    return;
  }
  const bool completed = record->state == idem::RecordState::kCompleted;
  Check(completed || record->state == idem::RecordState::kInProgress);
  Check(completed == (record->response != nullptr));
  if (completed) {
    Check(record->response->status >= 100 && record->response->status <= 999);
  }

  const std::string again = idem::EncodeRecord(*record);
  Check(again == bytes);
  const auto redecoded = idem::DecodeRecord(again);
  Check(redecoded.has_value() && *redecoded == *record);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  DecodeAndCheck(bytes);

  if (size >= 4) {
    std::string sealed(bytes.substr(0, size - 4));
    const std::uint32_t crc = Crc32c(sealed);
    for (int i = 0; i < 4; ++i) {
      sealed.push_back(static_cast<char>((crc >> (8 * i)) & 0xFF));
    }
    DecodeAndCheck(sealed);
  }
  return 0;
}
