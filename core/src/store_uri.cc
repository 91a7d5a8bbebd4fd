#include "idem/store_uri.h"

#include <algorithm>
#include <charconv>
#include <memory>

#include <uriparser/Uri.h>

namespace idem {
namespace {

std::string Range(const UriTextRangeA& r) {
  if (r.first == nullptr || r.afterLast == nullptr) return {};
  return std::string(r.first, r.afterLast);
}

std::string Unescape(std::string s) {
  if (s.empty()) return s;
  // uriparser unescapes in place and returns the new end.
  const char* end = uriUnescapeInPlaceA(s.data());
  s.resize(static_cast<std::size_t>(end - s.data()));
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  });
  return out;
}

struct UriDeleter {
  void operator()(UriUriA* u) const {
    uriFreeUriMembersA(u);
    delete u;
  }
};

struct QueryListDeleter {
  void operator()(UriQueryListA* q) const { uriFreeQueryListA(q); }
};

}  // namespace

std::string WithUriParams(std::string_view uri, std::string_view params) {
  std::string out(uri);
  if (params.empty()) return out;
  out += out.find('?') == std::string::npos ? '?' : '&';
  out += params;
  return out;
}

std::string WithUriParam(std::string_view uri, std::string_view name,
                         std::string_view value) {
  const std::size_t q = uri.find('?');
  std::string out(uri.substr(0, q));
  std::string_view query =
      q == std::string_view::npos ? std::string_view() : uri.substr(q + 1);
  std::string kept;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view()
                                          : query.substr(amp + 1);
    if (param.empty() || param.substr(0, param.find('=')) == name) continue;
    kept += kept.empty() ? "" : "&";
    kept += param;
  }
  out = WithUriParams(out, kept);
  return WithUriParams(out, std::string(name) + "=" + std::string(value));
}

std::string RedactUri(std::string_view uri) {
  std::string out(uri);
  // userinfo password: scheme://user:PASSWORD@host. Found in the raw text,
  // never through the URI parser, since the text that most needs redacting
  // is the one that does not parse, or parses wrongly: a password with a raw
  // '/', '?' or '#' ends the authority early for a parser (u:12/ab@h parses
  // as host u, port 12, path /ab@h), and one with '@' moves the host. So the
  // password runs from the first ':' after "//" to the LAST '@' of the whole
  // text. When a '@' also appears in the path or query this redacts more
  // than the password (host:5432/db?x=a@b becomes host:***@b): in an error
  // message, hiding too much is the safe mistake.
  const auto authority = out.find("://");
  if (authority != std::string::npos) {
    const std::size_t start = authority + 3;
    const std::size_t at = out.rfind('@');
    if (at != std::string::npos && at >= start) {
      const std::size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) {
        out.replace(colon + 1, at - colon - 1, "***");
      }
    }
  }
  // ?password=SECRET or &password=SECRET
  for (std::size_t pos = 0;;) {
    pos = out.find("password=", pos);
    if (pos == std::string::npos) break;
    const bool param_start =
        pos > 0 && (out[pos - 1] == '?' || out[pos - 1] == '&');
    const std::size_t value = pos + 9;
    if (!param_start) {
      pos = value;
      continue;
    }
    std::size_t value_end = out.find_first_of("&#", value);
    if (value_end == std::string::npos) value_end = out.size();
    out.replace(value, value_end - value, "***");
    pos = value + 3;
  }
  return out;
}

Error StoreUri::InvalidArgument(std::string_view what) const {
  return Error(ErrorCode::kInvalidArgument,
               std::string(what) + " in store URI '" + redacted_ + "'");
}

Result<StoreUri> StoreUri::Parse(std::string_view text) {
  StoreUri out;
  out.redacted_ = RedactUri(text);
  const std::string copy(text);
  std::unique_ptr<UriUriA, UriDeleter> uri(new UriUriA{});
  const char* error_pos = nullptr;
  if (uriParseSingleUriExA(uri.get(), copy.data(), copy.data() + copy.size(),
                           &error_pos) != URI_SUCCESS) {
    // Not freeing members on failure is allowed by uriparser, but freeing an
    // unset struct is also safe: it was value-initialized.
    const std::size_t at =
        error_pos ? static_cast<std::size_t>(error_pos - copy.data()) : 0;
    return tl::unexpected(out.InvalidArgument("malformed URI (at character " +
                                              std::to_string(at) + ")"));
  }
  out.scheme_ = Lower(Range(uri->scheme));
  if (out.scheme_.empty()) {
    return tl::unexpected(out.InvalidArgument(
        "missing scheme (expected e.g. memory:, rocksdb:, sqlite:, "
        "postgresql:)"));
  }
  const std::string userinfo = Range(uri->userInfo);
  if (const auto colon = userinfo.find(':'); colon != std::string::npos) {
    out.user_ = Unescape(userinfo.substr(0, colon));
    out.password_ = Unescape(userinfo.substr(colon + 1));
  } else {
    out.user_ = Unescape(userinfo);
  }
  out.host_ = Unescape(Range(uri->hostText));
  out.port_ = Range(uri->portText);

  std::string path;
  const bool has_authority = uri->hostText.first != nullptr;
  for (const UriPathSegmentA* seg = uri->pathHead; seg != nullptr;
       seg = seg->next) {
    if (!path.empty() || seg != uri->pathHead) path += '/';
    path += Unescape(Range(seg->text));
  }
  // rocksdb:/a/b and sqlite:///a/b are absolute paths; postgresql://h/db
  // names a database, which the backend reads without the slash.
  if ((!has_authority && uri->absolutePath) ||
      (has_authority && out.host_.empty() && uri->pathHead != nullptr)) {
    path.insert(0, "/");
  }
  out.path_ = std::move(path);

  if (uri->query.first != nullptr && uri->query.first != uri->query.afterLast) {
    UriQueryListA* raw = nullptr;
    int count = 0;
    if (uriDissectQueryMallocA(&raw, &count, uri->query.first,
                               uri->query.afterLast) != URI_SUCCESS) {
      return tl::unexpected(out.InvalidArgument("malformed query"));
    }
    std::unique_ptr<UriQueryListA, QueryListDeleter> list(raw);
    for (const UriQueryListA* q = list.get(); q != nullptr; q = q->next) {
      std::string key = q->key ? q->key : "";
      std::string value = q->value ? q->value : "";
      if (key.empty()) continue;  // "memory:?" or a stray '&'.
      for (const auto& [k, v] : out.params_) {
        if (k == key) {
          return tl::unexpected(
              out.InvalidArgument("parameter '" + key + "' given twice"));
        }
      }
      out.params_.emplace_back(std::move(key), std::move(value));
    }
  }
  return out;
}

std::optional<std::string> StoreUri::TakeString(std::string_view name) {
  for (auto it = params_.begin(); it != params_.end(); ++it) {
    if (it->first == name) {
      std::string value = std::move(it->second);
      params_.erase(it);
      return value;
    }
  }
  return std::nullopt;
}

bool StoreUri::ParseUint(std::string_view text, std::uint64_t& value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return !text.empty() && ec == std::errc() && ptr == end;
}

Result<std::optional<std::uint64_t>> StoreUri::TakeUint(std::string_view name,
                                                        std::uint64_t min,
                                                        std::uint64_t max) {
  auto raw = TakeString(name);
  if (!raw) return std::optional<std::uint64_t>();
  std::uint64_t value = 0;
  if (!ParseUint(*raw, value) || value < min || value > max) {
    return tl::unexpected(
        InvalidArgument("parameter '" + std::string(name) +
                        "' must be an integer from " + std::to_string(min) +
                        " to " + std::to_string(max) + ", got '" + *raw + "'"));
  }
  return std::optional<std::uint64_t>(value);
}

Result<std::optional<bool>> StoreUri::TakeBool(std::string_view name) {
  auto raw = TakeString(name);
  if (!raw) return std::optional<bool>();
  const std::string v = Lower(*raw);
  if (v == "true" || v == "1" || v == "yes" || v == "on") {
    return std::optional<bool>(true);
  }
  if (v == "false" || v == "0" || v == "no" || v == "off") {
    return std::optional<bool>(false);
  }
  return tl::unexpected(InvalidArgument("parameter '" + std::string(name) +
                                        "' must be true or false, got '" +
                                        *raw + "'"));
}

Result<std::optional<std::string>> StoreUri::TakeEnum(
    std::string_view name, const std::vector<std::string_view>& allowed) {
  auto raw = TakeString(name);
  if (!raw) return std::optional<std::string>();
  const std::string v = Lower(*raw);
  std::string choices;
  for (std::string_view a : allowed) {
    if (v == a) return std::optional<std::string>(v);
    if (!choices.empty()) choices += ", ";
    choices += a;
  }
  return tl::unexpected(InvalidArgument("parameter '" + std::string(name) +
                                        "' must be one of " + choices +
                                        ", got '" + *raw + "'"));
}

Status StoreUri::ReadBool(std::string_view name, bool& out) {
  IDEM_ASSIGN_OR_RETURN(const auto value, TakeBool(name));
  if (value) out = *value;
  return {};
}

Status StoreUri::ReadString(std::string_view name, std::string& out) {
  if (auto value = TakeString(name)) out = std::move(*value);
  return {};
}

Status StoreUri::RequireLocalPath(std::string_view usage) const {
  if (!user_.empty() || !password_.empty() || !host_.empty() ||
      !port_.empty()) {
    return tl::unexpected(
        InvalidArgument("unexpected host (" + std::string(usage) + ")"));
  }
  if (path_.empty()) {
    return tl::unexpected(
        InvalidArgument("missing the path (" + std::string(usage) + ")"));
  }
  return {};
}

Status StoreUri::RejectUnknown() const {
  if (params_.empty()) return {};
  return tl::unexpected(InvalidArgument("unknown parameter '" +
                                        params_.front().first + "' for " +
                                        scheme_ + ":"));
}

}  // namespace idem
