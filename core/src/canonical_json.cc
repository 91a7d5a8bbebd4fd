// RFC 8785 (JCS) canonicalization: nlohmann parses into its DOM through our
// own SAX handler (which rejects duplicate names and excessive depth), and a
// serializer written here emits the canonical text. nlohmann's own dump() is
// not used: it sorts names by UTF-8 bytes, escapes differently and prints
// numbers in C++ rather than ECMAScript style.

#include "idem/canonical_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace idem {
namespace {

using Json = nlohmann::json;

// Builds the DOM like nlohmann's own SAX DOM parser, but fails on a repeated
// member name, a non-finite number or too deep a nesting instead of
// accepting them. (nlohmann's callback parser could see the keys too, but it
// rescans the parent container on every close, which is quadratic.)
class DomBuilder {
 public:
  Json& root() { return root_; }

  bool null() { return Put(Json(nullptr)); }
  bool boolean(bool v) { return Put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) {
    if (!std::isfinite(v)) return false;
    return Put(Json(v));
  }
  bool string(Json::string_t& v) { return Put(Json(std::move(v))); }
  bool binary(Json::binary_t&) { return false; }  // Not produced by JSON.

  bool start_object(std::size_t) { return Open(Json::object()); }
  bool key(Json::string_t& k) {
    auto& members = open_.back()->get_ref<Json::object_t&>();
    auto [it, inserted] = members.emplace(std::move(k), nullptr);
    if (!inserted) return false;  // Duplicate member name.
    pending_ = &it->second;
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_array() {
    open_.pop_back();
    return true;
  }

  template <typename Exception>
  bool parse_error(std::size_t, const std::string&, const Exception&) {
    return false;
  }

 private:
  // Stores a complete value where the parser is: the root, the next array
  // element or the member whose key came last. Returns where it went.
  Json* Place(Json&& v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      auto& items = parent.get_ref<Json::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    *pending_ = std::move(v);
    return pending_;
  }
  bool Put(Json&& v) {
    Place(std::move(v));
    return true;
  }
  bool Open(Json&& container) {
    if (open_.size() >= kMaxCanonicalJsonDepth) return false;
    // Pointers to open containers stay valid: only the innermost one grows.
    open_.push_back(Place(std::move(container)));
    return true;
  }

  Json root_;
  std::vector<Json*> open_;
  Json* pending_ = nullptr;
};

// Orders member names by their UTF-16 code units, as JCS requires, working
// on the UTF-8 bytes directly. UTF-8 byte order equals code point order, and
// that equals UTF-16 order except when a character in U+E000..U+FFFF (lead
// byte 0xEE/0xEF) meets one above U+FFFF (lead byte 0xF0..0xF4), whose
// UTF-16 form starts with a surrogate 0xD800..0xDBFF and so sorts first.
// Valid UTF-8 (which nlohmann guarantees) puts the first differing byte of
// two names at the same code point boundary in both, so looking at that
// byte is enough.
bool Utf16Less(std::string_view a, std::string_view b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  if (i == n) return a.size() < b.size();
  const auto x = static_cast<unsigned char>(a[i]);
  const auto y = static_cast<unsigned char>(b[i]);
  const bool x_high_bmp = x == 0xEE || x == 0xEF;
  const bool y_high_bmp = y == 0xEE || y == 0xEF;
  if (x >= 0xF0 && y_high_bmp) return true;
  if (y >= 0xF0 && x_high_bmp) return false;
  return x < y;
}

void AppendString(std::string_view s, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out.push_back(kHex[(c >> 4) & 0xF]);
          out.push_back(kHex[c & 0xF]);
        } else {
          out.push_back(c);  // Includes DEL and all non-ASCII UTF-8.
        }
    }
  }
  out.push_back('"');
}

// ECMAScript Number::toString (ECMA-262, "Number::toString"), which JCS
// prescribes. std::to_chars gives the shortest digits that round-trip,
// picking the closest when several do: exactly the digits s and exponent n
// the ECMAScript algorithm asks for. The rest is its layout rules.
void AppendJcsNumber(double v, std::string& out) {
  if (!std::isfinite(v)) {  // Unreachable from CanonicalizeJson.
    out += "null";
    return;
  }
  if (v == 0) {  // Also -0.
    out.push_back('0');
    return;
  }
  if (v < 0) {
    out.push_back('-');
    v = -v;
  }
  char buf[32];
  const auto res =
      std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  // sci is "d[.ddd]e(+|-)xx".
  const std::size_t e = sci.find('e');
  char digits[20];
  int k = 0;
  for (const char c : sci.substr(0, e)) {
    if (c != '.') digits[k++] = c;
  }
  int exponent = 0;
  std::string_view exp_text = sci.substr(e + 1);
  const bool negative_exp = exp_text.front() == '-';
  exp_text.remove_prefix(1);  // to_chars always writes the sign.
  std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);
  if (negative_exp) exponent = -exponent;
  const int n = exponent + 1;  // v = 0.d1d2...dk * 10^n

  if (k <= n && n <= 21) {
    out.append(digits, static_cast<std::size_t>(k));
    out.append(static_cast<std::size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out.append(digits, static_cast<std::size_t>(n));
    out.push_back('.');
    out.append(digits + n, static_cast<std::size_t>(k - n));
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out.append(digits, static_cast<std::size_t>(k));
  } else {
    out.push_back(digits[0]);
    if (k > 1) {
      out.push_back('.');
      out.append(digits + 1, static_cast<std::size_t>(k - 1));
    }
    out.push_back('e');
    out.push_back(n - 1 >= 0 ? '+' : '-');
    char exp_buf[8];
    const auto r = std::to_chars(exp_buf, exp_buf + sizeof exp_buf,
                                 n - 1 >= 0 ? n - 1 : 1 - n);
    out.append(exp_buf, r.ptr);
  }
}

// Recursion depth is bounded by kMaxCanonicalJsonDepth (DomBuilder).
void AppendValue(const Json& v, std::string& out) {
  switch (v.type()) {
    case Json::value_t::null:
      out += "null";
      return;
    case Json::value_t::boolean:
      out += v.get<bool>() ? "true" : "false";
      return;
    case Json::value_t::number_integer:
      // JCS numbers are doubles: a large integer becomes the double it
      // rounds to, as JSON.parse would make it.
      AppendJcsNumber(static_cast<double>(v.get<Json::number_integer_t>()),
                      out);
      return;
    case Json::value_t::number_unsigned:
      AppendJcsNumber(static_cast<double>(v.get<Json::number_unsigned_t>()),
                      out);
      return;
    case Json::value_t::number_float:
      AppendJcsNumber(v.get<Json::number_float_t>(), out);
      return;
    case Json::value_t::string:
      AppendString(v.get_ref<const Json::string_t&>(), out);
      return;
    case Json::value_t::array: {
      out.push_back('[');
      bool first = true;
      for (const Json& item : v.get_ref<const Json::array_t&>()) {
        if (!first) out.push_back(',');
        first = false;
        AppendValue(item, out);
      }
      out.push_back(']');
      return;
    }
    case Json::value_t::object: {
      const auto& members = v.get_ref<const Json::object_t&>();
      std::vector<const Json::object_t::value_type*> sorted;
      sorted.reserve(members.size());
      for (const auto& m : members) sorted.push_back(&m);
      // The map is in UTF-8 byte order already; this only moves names in
      // U+E000..U+FFFF behind those above U+FFFF.
      std::sort(sorted.begin(), sorted.end(),
                [](auto* a, auto* b) { return Utf16Less(a->first, b->first); });
      out.push_back('{');
      bool first = true;
      for (const auto* m : sorted) {
        if (!first) out.push_back(',');
        first = false;
        AppendString(m->first, out);
        out.push_back(':');
        AppendValue(m->second, out);
      }
      out.push_back('}');
      return;
    }
    case Json::value_t::binary:
    case Json::value_t::discarded:
      break;  // Never built by DomBuilder.
  }
}

}  // namespace

std::string JcsNumberToString(double v) {
  std::string out;
  AppendJcsNumber(v, out);
  return out;
}

std::optional<std::string> CanonicalizeJson(std::string_view json) {
  // nlohmann's lexer takes a NUL byte for the end of input, so "{}\0junk"
  // would pass as "{}" and two different bodies would share a fingerprint.
  // A raw NUL is never valid JSON (not even inside a string), so refuse it.
  if (json.find('\0') != std::string_view::npos) return std::nullopt;
  DomBuilder builder;
  try {
    if (!Json::sax_parse(json.data(), json.data() + json.size(), &builder)) {
      return std::nullopt;
    }
  } catch (const std::exception&) {
    // nlohmann reports size-limit violations by throwing, and allocation can
    // fail on a large body; either way this is not a canonicalizable text.
    return std::nullopt;
  }
  std::string out;
  out.reserve(json.size());
  AppendValue(builder.root(), out);
  return out;
}

}  // namespace idem
