// Parsing of the Idempotency-Key request header (SEMANTICS.md step 2).
//
// The header is a Structured Field sf-string ("abc", with \" and \\ escapes)
// per the IETF idempotency-key draft; a bare token (abc), as most clients
// send it, is accepted too.
//
// Thread-safety: pure functions.

#ifndef IDEM_IDEMPOTENCY_KEY_H_
#define IDEM_IDEMPOTENCY_KEY_H_

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace idem {

inline constexpr std::string_view kIdempotencyKeyHeader = "Idempotency-Key";
inline constexpr std::size_t kDefaultMaxKeyLength = 255;

// Why a key was rejected. Each is its own rule of step 2; all are answered
// with 400 `idempotency_key_invalid` and differ only in the problem detail.
enum class KeyError {
  kEmpty,             // "" or a value with nothing but whitespace.
  kTooLong,           // More than max_key_length bytes after unquoting.
  kInvalidCharacter,  // A byte outside 0x20-0x7E (also inside quotes).
  kBadQuoting,        // Unterminated quote, bad escape, text after quote.
  kDuplicate,         // The header was given more than once.
};

std::string_view KeyErrorName(KeyError error);
// A sentence for the problem body's `detail`; never quotes the key.
std::string_view KeyErrorDetail(KeyError error);

// Parses one header value. Optional whitespace (SP / HTAB) around the value
// is ignored. Returns the key with quotes and escapes removed.
tl::expected<std::string, KeyError> ParseIdempotencyKey(
    std::string_view value, std::size_t max_key_length = kDefaultMaxKeyLength);

// Parses all values of the header as received (in order). Exactly one value
// must be present (kDuplicate otherwise; an empty span is the caller's "no
// key" case and yields kEmpty).
tl::expected<std::string, KeyError> ParseIdempotencyKeyHeaders(
    std::span<const std::string_view> values,
    std::size_t max_key_length = kDefaultMaxKeyLength);

}  // namespace idem

#endif  // IDEM_IDEMPOTENCY_KEY_H_
