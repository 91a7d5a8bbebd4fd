#include "stored_responses.h"

#include <chrono>
#include <cstdio>

#include "idem/guard_options.h"

namespace idem::demo {

Result<std::shared_ptr<const ResponseKeyRing>> LoadResponseKeysFlag(
    const std::string& path) {
  auto ring = ResponseKeyRing::LoadFile(path);
  if (!ring) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--response-keys: " + ring.error().message());
  }
  return ring;
}

Result<std::vector<std::string>> ParseFingerprintFieldsFlag(
    std::string_view text) {
  GuardOptions check;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    check.fingerprint_fields.emplace_back(text.substr(0, comma));
    text.remove_prefix(comma == std::string_view::npos ? text.size()
                                                       : comma + 1);
  }
  if (auto valid = check.Validate(); !valid) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--fingerprint-fields: " + valid.error().message());
  }
  return check.fingerprint_fields;
}

std::string ImfFixdate(TimePoint t) {
  using namespace std::chrono;
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed",
                                          "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr",
                                            "May", "Jun", "Jul", "Aug",
                                            "Sep", "Oct", "Nov", "Dec"};
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss hms{floor<seconds>(t - day)};
  const weekday wd{day};
  char out[40];
  std::snprintf(out, sizeof out, "%s, %02u %s %04d %02d:%02d:%02d GMT",
                kDays[wd.c_encoding()], static_cast<unsigned>(ymd.day()),
                kMonths[static_cast<unsigned>(ymd.month()) - 1],
                static_cast<int>(ymd.year()),
                static_cast<int>(hms.hours().count()),
                static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return out;
}

void AddReplayExpiresHeader(const ReplayInfo& info, Headers& headers) {
  if (!info.expires_at) return;
  headers.emplace_back("X-Idempotency-Expires", ImfFixdate(*info.expires_at));
}

}  // namespace idem::demo
