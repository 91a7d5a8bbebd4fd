// Fuzzes RFC 8785 canonicalization. Whatever canonicalizes must be a fixed
// point (canonicalizing the output gives it back unchanged), must be valid
// JSON to an independent parse, and must contain no raw control bytes;
// nothing may crash, hang or read out of bounds on any input.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "idem/canonical_json.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  const auto canonical = idem::CanonicalizeJson(json);
  if (!canonical) return 0;

  Check(!canonical->empty());
  for (const char c : *canonical) Check(static_cast<unsigned char>(c) >= 0x20);
  const auto again = idem::CanonicalizeJson(*canonical);
  Check(again.has_value() && *again == *canonical);
  Check(nlohmann::json::accept(*canonical));
  // No insignificant whitespace survives: every space is inside a string.
  bool in_string = false;
  bool escaped = false;
  for (const char c : *canonical) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else {
      Check(c != ' ');
      if (c == '"') in_string = true;
    }
  }
  return 0;
}
