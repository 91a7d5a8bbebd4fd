#include "secrets.h"

#include <algorithm>

namespace idem::idemctl {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 &&
        HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

void Secrets::Add(std::string secret) {
  if (secret.empty()) return;
  if (std::find(secrets_.begin(), secrets_.end(), secret) != secrets_.end()) {
    return;
  }
  secrets_.push_back(std::move(secret));
  std::sort(secrets_.begin(), secrets_.end(),
            [](const std::string& a, const std::string& b) {
              return a.size() > b.size();
            });
}

void Secrets::LearnFrom(std::string_view text) {
  // The userinfo password, found as RedactUri finds it: from the first ':'
  // after "//" to the last '@' (so a raw '@' or '/' in it hides more, never
  // less).
  if (const auto slashes = text.find("//"); slashes != std::string_view::npos) {
    const auto at = text.rfind('@');
    const auto colon = text.find(':', slashes + 2);
    if (at != std::string_view::npos && colon != std::string_view::npos &&
        colon < at) {
      const std::string_view password = text.substr(colon + 1, at - colon - 1);
      Add(std::string(password));
      Add(PercentDecode(password));
    }
  }
  // password=... in a query (or a libpq conninfo given as text).
  for (std::size_t pos = 0;
       (pos = text.find("password=", pos)) != std::string_view::npos;) {
    pos += 9;
    const auto end = text.find_first_of("&# ", pos);
    const std::string_view value = text.substr(
        pos, end == std::string_view::npos ? text.size() - pos : end - pos);
    Add(std::string(value));
    Add(PercentDecode(value));
  }
}

std::string Secrets::Scrub(std::string_view text) const {
  std::string out(text);
  for (const std::string& secret : secrets_) {
    for (std::size_t pos = 0;
         (pos = out.find(secret, pos)) != std::string::npos;) {
      out.replace(pos, secret.size(), "***");
      pos += 3;
    }
  }
  return out;
}

}  // namespace idem::idemctl
