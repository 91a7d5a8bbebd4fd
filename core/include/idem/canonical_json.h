// RFC 8785 JSON Canonicalization Scheme, for fingerprinting JSON bodies so
// that retries differing only in whitespace, member order, escaping or number
// spelling (1.50 vs 1.5, 1E3 vs 1000) match.
//
// What is rejected (nullopt), so the caller falls back to hashing raw bytes:
//  - anything that is not exactly one JSON text (RFC 8259), including
//    invalid UTF-8, a raw NUL byte anywhere and lone surrogate escapes such
//    as "\ud800" (a leading UTF-8 byte order mark is ignored, as RFC 8259
//    allows);
//  - a number outside the IEEE double range (1e400): JCS has no form for it;
//  - an object with the same member name twice. RFC 8785 requires I-JSON
//    (RFC 7493), which forbids duplicates; keeping one of them, as most
//    parsers do, would let {"a":1,"a":2} match {"a":2};
//  - nesting deeper than kMaxCanonicalJsonDepth arrays/objects, which bounds
//    the stack the serializer uses.
//
// Every number is an IEEE double, as in JCS: an integer literal that a double
// cannot hold exactly is serialized as the double it rounds to
// (9007199254740993 -> 9007199254740992), so two literals that round to the
// same double are the same body.
//
// Thread-safety: pure function.

#ifndef IDEM_CANONICAL_JSON_H_
#define IDEM_CANONICAL_JSON_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace idem {

inline constexpr std::size_t kMaxCanonicalJsonDepth = 512;

// The canonical form of `json` (UTF-8), or nullopt when it is rejected as
// described above.
std::optional<std::string> CanonicalizeJson(std::string_view json);

// How JCS writes the number `v`: ECMAScript's Number.prototype.toString
// ("1e+21", "0.000001", "1.5e-7", -0 as "0"). A non-finite `v` gives "null",
// as JSON.stringify does; CanonicalizeJson never gets there.
std::string JcsNumberToString(double v);

}  // namespace idem

#endif  // IDEM_CANONICAL_JSON_H_
