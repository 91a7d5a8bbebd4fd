// Private to core: GuardOptions::fingerprint_fields, the JSON members that
// identify a request (RFC 6901 pointers, parsed by nlohmann::json_pointer).
#ifndef IDEM_CORE_SRC_FINGERPRINT_FIELDS_H_
#define IDEM_CORE_SRC_FINGERPRINT_FIELDS_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/fingerprint.h"

namespace idem::internal {

// Why `pointer` is not an RFC 6901 JSON pointer, or nullopt when it is.
std::optional<std::string> FingerprintFieldError(const std::string& pointer);

// The bytes that stand for `body` in the fingerprint when only `fields`
// identify it: a tag, then per field, in the configured order, the pointer
// and either "absent" or the member's RFC 8785 canonical form (null is a
// value like any other), each length-prefixed. Returns false (and leaves
// `out` alone) when `body` is not JSON, or nests deeper than
// kMaxCanonicalJsonDepth.
bool ProjectFingerprintFields(std::string_view body,
                              const std::vector<std::string>& fields,
                              std::string& out);

// With `fields` (GuardOptions::fingerprint_fields) not empty: `input`'s body
// becomes its projection, kept in `storage`, hashed raw. Returns false
// (and leaves `input` alone) when the body is not JSON: the caller answers
// 400 idempotency_body_not_json (Outcome::kBodyNotJson), since a route
// that names members cannot identify a request without them. Empty
// `fields`: nothing changes, true.
[[nodiscard]] bool ApplyFingerprintFields(
    const std::vector<std::string>& fields, FingerprintInput& input,
    std::string& storage);

}  // namespace idem::internal

#endif  // IDEM_CORE_SRC_FINGERPRINT_FIELDS_H_
