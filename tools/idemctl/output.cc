#include "output.h"

#include <string>

#include "idemctl.h"

namespace idem::idemctl {

int Output::Fail(int code, std::string_view message) {
  std::string line;
  for (const char c : secrets_.Scrub(message)) {
    const bool blank = static_cast<unsigned char>(c) < 0x20 || c == ' ';
    if (blank && (line.empty() || line.back() == ' ')) continue;
    line += blank ? ' ' : c;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  err_ << "idemctl: " << line << '\n';
  return code;
}

int Output::StoreFailed(std::string_view doing, const Error& error) {
  const int code =
      error.code() == ErrorCode::kInvalidArgument ? kUsage : kStoreError;
  return Fail(code, std::string(doing) + ": " + error.ToString());
}

}  // namespace idem::idemctl
