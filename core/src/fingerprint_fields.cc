// GuardOptions::fingerprint_fields (fingerprint_fields.h).
#include "fingerprint_fields.h"

#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>

#include "idem/canonical_json.h"

namespace idem::internal {
namespace {

// Not JSON, so no body hashed raw (on a route without fingerprint_fields)
// begins like a projection of its members.
constexpr std::string_view kTag{"\0idem-fingerprint-fields-v1\0", 28};

void AddField(std::string& out, std::string_view field) {
  const std::uint64_t n = field.size();
  for (int shift = 56; shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>(n >> shift));
  }
  out += field;
}

}  // namespace

std::optional<std::string> FingerprintFieldError(const std::string& pointer) {
  try {
    nlohmann::json::json_pointer parsed(pointer);
    (void)parsed;
    return std::nullopt;
  } catch (const nlohmann::json::exception& e) {
    return std::string(e.what());
  }
}

bool ProjectFingerprintFields(std::string_view body,
                              const std::vector<std::string>& fields,
                              std::string& out) {
  // Deeper than the canonical-JSON limit counts as not JSON: dump() below
  // recurses, and a 1 MiB body of brackets must not exhaust the stack.
  bool too_deep = false;
  const auto depth_check = [&too_deep](int depth, nlohmann::json::parse_event_t,
                                       nlohmann::json&) {
    if (depth > static_cast<int>(kMaxCanonicalJsonDepth)) too_deep = true;
    return true;
  };
  const nlohmann::json doc =
      nlohmann::json::parse(body, depth_check, /*allow_exceptions=*/false);
  if (doc.is_discarded() || too_deep) return false;
  std::string projected(kTag);
  for (const std::string& field : fields) {
    AddField(projected, field);
    std::optional<std::string> text;
    try {
      const nlohmann::json::json_pointer pointer(field);
      if (doc.contains(pointer)) text = doc.at(pointer).dump();
    } catch (const nlohmann::json::exception&) {
      // An index that is not a number on an array, "-": no such member.
      text.reset();
    }
    if (!text) {
      AddField(projected, "absent");
      continue;
    }
    // The member's text is valid JSON, so its canonical form exists; the
    // text itself is the fallback should the canonicalizer refuse a number
    // it cannot represent, which still hashes the value.
    const std::optional<std::string> canonical = CanonicalizeJson(*text);
    AddField(projected, "value");
    AddField(projected, canonical ? *canonical : *text);
  }
  out = std::move(projected);
  return true;
}

bool ApplyFingerprintFields(const std::vector<std::string>& fields,
                            FingerprintInput& input, std::string& storage) {
  if (fields.empty()) return true;
  if (!ProjectFingerprintFields(input.body, fields, storage)) return false;
  input.body = storage;
  input.body_mode = BodyFingerprint::kRaw;
  return true;
}

}  // namespace idem::internal
