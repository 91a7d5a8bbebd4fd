// Parsing of the Idempotency-Key request header (SEMANTICS.md step 2).
//
// The header is a Structured Field sf-string ("abc", with \" and \\ escapes)
// per the IETF idempotency-key draft; a bare value (abc), as most clients
// send it, is accepted too. Both forms name the same key: `abc` and `"abc"`
// parse to the same string.
//
// Rules, applied in this order to the value with its surrounding SP / HTAB
// removed (the first that fails decides the error):
//   1. nothing left                                   -> kEmpty
//   2. any byte outside 0x20-0x7E, quoted or not      -> kInvalidCharacter
//   3. starts with `"`: an sf-string that must end with the closing quote;
//      an unterminated string, an escape other than \" and \\, or anything
//      after the closing quote                         -> kBadQuoting
//      does not start with `"`: a bare value that must contain no `"` and
//      no `\`                                          -> kBadQuoting
//   4. the key (quotes and escapes removed) is empty   -> kEmpty
//   5. the key is longer than max_key_length bytes     -> kTooLong
//
// A bare value is taken verbatim between its first and last non-blank
// characters, so inner spaces and commas are part of the key ("a b" is the
// key `a b`). That is deliberately lenient: SEMANTICS step 2 rejects only the
// cases above, and rejecting a key a client has been sending for years would
// turn a harmless retry into a 400. A header that an intermediary folded from
// two bare values ("a, b") therefore reads as one key; two quoted values
// folded that way ("\"a\", \"b\"") are kBadQuoting.
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
  kEmpty,             // "" / `""` / a value with nothing but whitespace.
  kTooLong,           // More than max_key_length bytes after unquoting.
  kInvalidCharacter,  // A byte outside 0x20-0x7E (also inside quotes).
  kBadQuoting,        // Unterminated quote, bad escape, text after quote,
                      // or a `"` / `\` inside a bare value.
  kDuplicate,         // The header was given more than once.
};

// Stable snake_case name: "empty", "too_long", "invalid_character",
// "bad_quoting", "duplicate". For logs and metrics labels.
std::string_view KeyErrorName(KeyError error);
// A sentence for the problem body's `detail`; never quotes the key.
std::string_view KeyErrorDetail(KeyError error);

// Parses one header value. Optional whitespace (SP / HTAB) around the value
// is ignored. Returns the key with quotes and escapes removed: at most
// max_key_length bytes, every byte in 0x20-0x7E. Allocates only for a value
// that is accepted.
tl::expected<std::string, KeyError> ParseIdempotencyKey(
    std::string_view value, std::size_t max_key_length = kDefaultMaxKeyLength);

// Parses all values of the header as received (in order). Exactly one value
// must be present (kDuplicate otherwise, even when the values are equal; an
// empty span is the caller's "no key" case and yields kEmpty).
tl::expected<std::string, KeyError> ParseIdempotencyKeyHeaders(
    std::span<const std::string_view> values,
    std::size_t max_key_length = kDefaultMaxKeyLength);

}  // namespace idem

#endif  // IDEM_IDEMPOTENCY_KEY_H_
