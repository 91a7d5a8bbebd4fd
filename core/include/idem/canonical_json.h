// RFC 8785 JSON Canonicalization Scheme, for fingerprinting JSON bodies so
// that retries differing only in whitespace or member order match.
//
// Thread-safety: pure function.

#ifndef IDEM_CANONICAL_JSON_H_
#define IDEM_CANONICAL_JSON_H_

#include <optional>
#include <string>
#include <string_view>

namespace idem {

// The canonical form of `json`, or nullopt when it is not a single valid
// JSON text (or holds a number JCS cannot represent: NaN/Infinity, or an
// integer that does not fit an IEEE double exactly is serialized as the
// nearest double as RFC 8785 requires).
std::optional<std::string> CanonicalizeJson(std::string_view json);

}  // namespace idem

#endif  // IDEM_CANONICAL_JSON_H_
