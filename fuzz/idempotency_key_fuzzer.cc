// Fuzzes Idempotency-Key parsing. Input: byte 0 is max_key_length, the rest
// is the header value; the value split at '\n' is also fed to the
// several-values entry point. Checks what every accepted key promises (only
// printable ASCII, non-empty, within the limit), that the two accepted forms
// agree (the key quoted as an sf-string parses back to itself), and that the
// multi-value entry point is the single-value one plus kDuplicate/kEmpty.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "idem/idempotency_key.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

std::string Quote(std::string_view key) {
  std::string out = "\"";
  for (const char c : key) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  if (size == 0) return 0;
  const std::size_t max_length = data[0];
  const std::string_view value(reinterpret_cast<const char*>(data + 1),
                               size - 1);

  const auto key = idem::ParseIdempotencyKey(value, max_length);
  if (key) {
    Check(!key->empty());
    Check(key->size() <= max_length);
    Check(key->size() <= value.size());
    for (const char c : *key) {
      const auto u = static_cast<unsigned char>(c);
      Check(u >= 0x20 && u <= 0x7E);
    }
    const auto requoted = idem::ParseIdempotencyKey(Quote(*key), max_length);
    Check(requoted.has_value() && *requoted == *key);
    if (key->find_first_of("\"\\") == std::string::npos &&
        key->front() != ' ' && key->back() != ' ') {
      const auto bare = idem::ParseIdempotencyKey(*key, max_length);
      Check(bare.has_value() && *bare == *key);
    }
  } else {
    Check(!idem::KeyErrorName(key.error()).empty());
    Check(!idem::KeyErrorDetail(key.error()).empty());
    Check(key.error() != idem::KeyError::kDuplicate);
  }

  std::vector<std::string_view> values;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= value.size(); ++i) {
    if (i == value.size() || value[i] == '\n') {
      values.push_back(value.substr(start, i - start));
      start = i + 1;
    }
  }
  const auto multi = idem::ParseIdempotencyKeyHeaders(values, max_length);
  if (values.size() > 1) {
    Check(!multi && multi.error() == idem::KeyError::kDuplicate);
  } else {
    Check(multi == key);
  }
  return 0;
}
