// Store URIs (SEMANTICS.md, "Stores, chosen by URI"): parsing, typed
// parameters, and redaction of passwords for error messages.
//
//   memory:?capacity=1000000
//   rocksdb:/path/dir?sync=false
//   sqlite:/path/file.db?synchronous=normal
//   postgresql://user:secret@host:5432/db?table=idempotency_keys&pool=8
//
// Parsing is RFC 3986 (uriparser); query parameters are percent-decoded. A
// backend reads the parameters it knows with the Read* calls (each removes
// its parameter) and then calls RejectUnknown(), so a misspelt parameter is
// an error, never ignored:
//
//   IDEM_RETURN_IF_ERROR(uri.ReadUint("pool", options.pool_size, 1, 1024));
//   IDEM_RETURN_IF_ERROR(uri.RejectUnknown());
//
// Thread-safety: plain values.

#ifndef IDEM_STORE_URI_H_
#define IDEM_STORE_URI_H_

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
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

  // Typed parameters. Each removes parameter `name` and, when it is present
  // and valid, assigns it to `out`; when it is absent, `out` keeps its value
  // (the default). A present but invalid value leaves `out` unchanged and
  // returns kInvalidArgument naming the redacted URI, the parameter, what it
  // must be (with its range) and the value given.

  // An unsigned decimal integer in [min, max] (0 <= min <= max), assigned as
  // T (integral, wide enough for max).
  template <typename T>
  Status ReadUint(std::string_view name, T& out, std::type_identity_t<T> min,
                  std::type_identity_t<T> max);
  // An integer count of `Unit` (std::chrono::milliseconds for a parameter
  // named `*_ms`, std::chrono::seconds for `*_s`) in [min, max], 0 <= min,
  // assigned to `out`, any std::chrono::duration that holds a Unit without
  // truncation and holds max without overflow. Every duration parameter of
  // every store has a maximum, checked here before any conversion.
  template <typename Out, typename Unit>
  Status ReadDuration(std::string_view name, Out& out, Unit min, Unit max);
  // true/false/1/0/yes/no/on/off, case-insensitive.
  Status ReadBool(std::string_view name, bool& out);
  // Any text, including the empty one.
  Status ReadString(std::string_view name, std::string& out);
  // One of the names of `values` (lowercase; the parameter matches them
  // case-insensitively), assigned the value paired with it.
  template <typename E>
  Status ReadEnum(std::string_view name, E& out,
                  std::initializer_list<std::pair<std::string_view, E>> values);

  // The older optional-returning forms of the readers above (the same
  // checks and errors).
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

template <typename T>
Status StoreUri::ReadUint(std::string_view name, T& out,
                          std::type_identity_t<T> min,
                          std::type_identity_t<T> max) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>,
                "ReadUint reads an integer");
  IDEM_ASSIGN_OR_RETURN(const auto value,
                        TakeUint(name, static_cast<std::uint64_t>(min),
                                 static_cast<std::uint64_t>(max)));
  if (value) out = static_cast<T>(*value);
  return {};
}

template <typename Out, typename Unit>
Status StoreUri::ReadDuration(std::string_view name, Out& out, Unit min,
                              Unit max) {
  IDEM_ASSIGN_OR_RETURN(const auto value, TakeDuration(name, min, max));
  // Implicit, so a conversion that would truncate does not compile.
  if (value) out = *value;
  return {};
}

template <typename E>
Status StoreUri::ReadEnum(
    std::string_view name, E& out,
    std::initializer_list<std::pair<std::string_view, E>> values) {
  std::vector<std::string_view> names;
  names.reserve(values.size());
  for (const auto& value : values) names.push_back(value.first);
  IDEM_ASSIGN_OR_RETURN(const auto chosen, TakeEnum(name, names));
  if (!chosen) return {};
  for (const auto& [value_name, value] : values) {
    if (value_name == *chosen) {
      out = value;
      break;
    }
  }
  return {};
}

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

// `uri` with query parameter `name` set to `value`: any occurrence of it
// removed, then `name=value` appended (unescaped: `value` must need no
// percent-encoding). For the test and benchmark setups of the stores
// (store/store_descriptor.h).
std::string WithUriParam(std::string_view uri, std::string_view name,
                         std::string_view value);

// `uri` with the query text `params` ("a=1&b=2", unescaped) appended;
// `uri` itself when `params` is empty.
std::string WithUriParams(std::string_view uri, std::string_view params);

}  // namespace idem

#endif  // IDEM_STORE_URI_H_
