// Store URIs (SEMANTICS.md, "Stores, chosen by URI"): parsing, typed
// parameters, and redaction of passwords for error messages.
//
//   memory:?capacity=1000000
//   rocksdb:/path/dir?sync=false
//   sqlite:/path/file.db?synchronous=normal
//   postgresql://user:secret@host:5432/db?table=idempotency_keys&pool=8
//
// Parsing is RFC 3986 (uriparser); query parameters are percent-decoded. A
// backend takes the parameters it knows with the Take* calls and then calls
// RejectUnknown(), so a misspelt parameter is an error, never ignored.
//
// Thread-safety: plain values.

#ifndef IDEM_STORE_URI_H_
#define IDEM_STORE_URI_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/error.h"

namespace idem {

class StoreUri {
 public:
  // Errors: kInvalidArgument naming the (redacted) URI when it is not a URI,
  // has no scheme, or repeats a query parameter.
  static Result<StoreUri> Parse(std::string_view uri);

  const std::string& scheme() const { return scheme_; }  // Lowercase.
  const std::string& user() const { return user_; }
  const std::string& password() const { return password_; }
  const std::string& host() const { return host_; }
  const std::string& port() const { return port_; }  // "" when absent.
  // Percent-decoded path: "/path/dir" for rocksdb:/path/dir, "db" for
  // postgresql://h/db, "" for memory:.
  const std::string& path() const { return path_; }
  // The URI as given, with any password replaced by "***". Use this, never
  // the raw URI, in errors and logs.
  const std::string& redacted() const { return redacted_; }
  // Query parameters not yet taken, in order, percent-decoded.
  const std::vector<std::pair<std::string, std::string>>& params() const {
    return params_;
  }

  // Removes and returns parameter `name`.
  std::optional<std::string> TakeString(std::string_view name);
  // Unsigned integer in [min, max]; kInvalidArgument otherwise.
  Result<std::optional<std::uint64_t>> TakeUint(std::string_view name,
                                                std::uint64_t min,
                                                std::uint64_t max);
  // A duration: an integer count of `Unit` (std::chrono::milliseconds for a
  // parameter named `*_ms`, seconds for `*_s`) in [min, max], with min >= 0.
  // Every duration parameter of every store goes through this, so that each
  // has a maximum, checked where it enters, before any conversion can
  // overflow. kInvalidArgument naming the URI, the parameter, its range and
  // unit otherwise.
  template <typename Unit>
  Result<std::optional<Unit>> TakeDuration(std::string_view name, Unit min,
                                           Unit max);
  // true/false/1/0/yes/no/on/off; kInvalidArgument otherwise.
  Result<std::optional<bool>> TakeBool(std::string_view name);
  // One of `allowed` (case-insensitive, returned lowercased).
  Result<std::optional<std::string>> TakeEnum(
      std::string_view name, const std::vector<std::string_view>& allowed);
  // kInvalidArgument naming the URI and the first parameter left.
  Status RejectUnknown() const;

  // For a store on a local file or directory (`sqlite:/path/file.db`):
  // kInvalidArgument naming the URI when it has a user, password, host or
  // port ("unexpected host (<usage>)") or no path ("missing the path
  // (<usage>)"); `usage` says what the store takes, e.g. "the sqlite store
  // takes a file: sqlite:/path/file.db".
  Status RequireLocalPath(std::string_view usage) const;

  // kInvalidArgument "<what> in store URI '<redacted>'".
  Error InvalidArgument(std::string_view what) const;

 private:
  // Decimal digits only, no sign or space, no overflow.
  static bool ParseUint(std::string_view text, std::uint64_t& value);
  static std::string DurationUnitName(std::chrono::milliseconds) {
    return "ms";
  }
  static std::string DurationUnitName(std::chrono::seconds) { return "s"; }

  std::string scheme_, user_, password_, host_, port_, path_, redacted_;
  std::vector<std::pair<std::string, std::string>> params_;
};

template <typename Unit>
Result<std::optional<Unit>> StoreUri::TakeDuration(std::string_view name,
                                                   Unit min, Unit max) {
  const auto raw = TakeString(name);
  if (!raw) return std::optional<Unit>();
  const std::uint64_t lo = static_cast<std::uint64_t>(min.count());
  const std::uint64_t hi = static_cast<std::uint64_t>(max.count());
  std::uint64_t value = 0;
  if (!ParseUint(*raw, value) || value < lo || value > hi) {
    return tl::unexpected(InvalidArgument(
        "parameter '" + std::string(name) + "' must be a duration from " +
        std::to_string(lo) + " to " + std::to_string(hi) + " " +
        DurationUnitName(Unit(1)) + ", got '" + *raw + "'"));
  }
  return std::optional<Unit>(Unit(static_cast<typename Unit::rep>(value)));
}

// `uri` with the password of its userinfo replaced by "***" (and also any
// `password=` query parameter). Works on the raw text, without parsing it, so
// it also hides a password in a string that does not parse or parses wrongly
// (a raw '/', '?', '#' or '@' in the password): everything from the first ':'
// after "//" to the last '@' of the text is replaced. A '@' in the path or
// query thus hides more than the password, never less.
std::string RedactUri(std::string_view uri);

}  // namespace idem

#endif  // IDEM_STORE_URI_H_
