// Idempotency-Key header parsing; the rules and their order are documented in
// idempotency_key.h.

#include "idem/idempotency_key.h"

#include "idempotency_key_view.h"

namespace idem {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

bool IsPrintable(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x20 && u <= 0x7E;
}

std::string_view Trim(std::string_view v) {
  while (!v.empty() && IsBlank(v.front())) v.remove_prefix(1);
  while (!v.empty() && IsBlank(v.back())) v.remove_suffix(1);
  return v;
}

// Validates an sf-string (RFC 8941 section 3.3.3) that starts with `"` and
// returns the length of the unescaped content, or kBadQuoting. Counting first
// lets the caller reject an over-long key before allocating anything.
tl::expected<std::size_t, KeyError> CheckQuoted(std::string_view v) {
  std::size_t length = 0;
  for (std::size_t i = 1; i < v.size(); ++i) {
    const char c = v[i];
    if (c == '\\') {
      // A backslash as the last byte escapes nothing: unterminated.
      if (i + 1 >= v.size()) break;
      const char next = v[i + 1];
      if (next != '"' && next != '\\') {
        return tl::unexpected(KeyError::kBadQuoting);
      }
      ++i;
      ++length;
    } else if (c == '"') {
      if (i + 1 != v.size()) {  // Text after the closing quote.
        return tl::unexpected(KeyError::kBadQuoting);
      }
      return length;
    } else {
      ++length;
    }
  }
  return tl::unexpected(KeyError::kBadQuoting);  // No closing quote.
}

// The key inside a validated sf-string: a view of it when nothing is
// escaped, else unescaped into `scratch`.
std::string_view Unescape(std::string_view quoted, std::size_t length,
                          std::string& scratch) {
  const std::string_view inner = quoted.substr(1, quoted.size() - 2);
  if (inner.size() == length) return inner;
  scratch.clear();
  scratch.reserve(length);
  // Every backslash escapes one byte.
  for (std::size_t i = 0; i < inner.size(); ++i) {
    if (inner[i] == '\\') ++i;
    scratch.push_back(inner[i]);
  }
  return scratch;
}

tl::expected<std::string_view, KeyError> ParseOne(std::string_view value,
                                                  std::size_t max_key_length,
                                                  std::string& scratch) {
  const std::string_view v = Trim(value);
  if (v.empty()) return tl::unexpected(KeyError::kEmpty);
  for (const char c : v) {
    if (!IsPrintable(c)) return tl::unexpected(KeyError::kInvalidCharacter);
  }

  if (v.front() == '"') {
    const auto length = CheckQuoted(v);
    if (!length) return tl::unexpected(length.error());
    if (*length == 0) return tl::unexpected(KeyError::kEmpty);
    if (*length > max_key_length) return tl::unexpected(KeyError::kTooLong);
    return Unescape(v, *length, scratch);
  }

  if (v.find_first_of("\"\\") != std::string_view::npos) {
    return tl::unexpected(KeyError::kBadQuoting);
  }
  if (v.size() > max_key_length) return tl::unexpected(KeyError::kTooLong);
  return v;
}

}  // namespace

std::string_view KeyErrorName(KeyError error) {
  switch (error) {
    case KeyError::kEmpty:
      return "empty";
    case KeyError::kTooLong:
      return "too_long";
    case KeyError::kInvalidCharacter:
      return "invalid_character";
    case KeyError::kBadQuoting:
      return "bad_quoting";
    case KeyError::kDuplicate:
      return "duplicate";
  }
  return "unknown";
}

std::string_view KeyErrorDetail(KeyError error) {
  switch (error) {
    case KeyError::kEmpty:
      return "The Idempotency-Key header is empty. Send a unique, non-empty "
             "value such as a UUID.";
    case KeyError::kTooLong:
      return "The Idempotency-Key header is longer than this server accepts. "
             "Send a shorter unique value such as a UUID.";
    case KeyError::kInvalidCharacter:
      return "The Idempotency-Key header contains a character outside "
             "printable ASCII. Use only characters from space (0x20) to "
             "tilde (0x7E).";
    case KeyError::kBadQuoting:
      return "The Idempotency-Key header is not a valid quoted string. Either "
             "send the key without quotes and backslashes, or quote it as "
             "\"key\" with only \\\" and \\\\ escapes inside and nothing "
             "after the closing quote.";
    case KeyError::kDuplicate:
      return "The Idempotency-Key header was sent more than once. Send it "
             "exactly once per request.";
  }
  return "The Idempotency-Key header is invalid.";
}

tl::expected<std::string, KeyError> ParseIdempotencyKey(
    std::string_view value, std::size_t max_key_length) {
  std::string scratch;
  auto key = ParseOne(value, max_key_length, scratch);
  if (!key) return tl::unexpected(key.error());
  if (key->data() == scratch.data()) return scratch;
  return std::string(*key);
}

tl::expected<std::string, KeyError> ParseIdempotencyKeyHeaders(
    std::span<const std::string_view> values, std::size_t max_key_length) {
  if (values.empty()) return tl::unexpected(KeyError::kEmpty);
  if (values.size() > 1) return tl::unexpected(KeyError::kDuplicate);
  return ParseIdempotencyKey(values.front(), max_key_length);
}

namespace internal {

tl::expected<std::string_view, KeyError> ParseIdempotencyKeyView(
    std::span<const std::string_view> values, std::size_t max_key_length,
    std::string& scratch) {
  if (values.empty()) return tl::unexpected(KeyError::kEmpty);
  if (values.size() > 1) return tl::unexpected(KeyError::kDuplicate);
  return ParseOne(values.front(), max_key_length, scratch);
}

}  // namespace internal

}  // namespace idem
