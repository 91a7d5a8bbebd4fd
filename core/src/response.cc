#include "idem/response.h"

namespace idem {

bool HeaderNameEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    unsigned char x = static_cast<unsigned char>(a[i]);
    unsigned char y = static_cast<unsigned char>(b[i]);
    if (x >= 'A' && x <= 'Z') x = static_cast<unsigned char>(x + 32);
    if (y >= 'A' && y <= 'Z') y = static_cast<unsigned char>(y + 32);
    if (x != y) return false;
  }
  return true;
}

std::optional<std::string_view> Response::FindHeader(
    std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (HeaderNameEquals(n, name)) return std::string_view(v);
  }
  return std::nullopt;
}

}  // namespace idem
