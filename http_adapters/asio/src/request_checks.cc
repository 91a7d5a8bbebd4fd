#include "idem/asio/request_checks.h"

#include <string_view>

#include "idem/response.h"

namespace idem::asio {
namespace {

bool IsOws(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsOws(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<HeaderRejection> CheckRequestHeaders(
    std::span<const HeaderView> headers) {
  // Every coding of every Transfer-Encoding field, in order.
  std::size_t codings = 0;
  bool only_chunked = true;
  bool has_te = false;
  bool has_length = false;
  int authorizations = 0;
  for (const auto& [name, value] : headers) {
    if (HeaderNameEquals(name, "Content-Length")) has_length = true;
    if (HeaderNameEquals(name, "Authorization")) ++authorizations;
    if (!HeaderNameEquals(name, "Transfer-Encoding")) continue;
    has_te = true;
    std::string_view rest = value;
    for (;;) {
      const std::size_t comma = rest.find(',');
      const std::string_view coding = Trim(rest.substr(0, comma));
      // Empty list elements are allowed by the list syntax; skip them.
      if (!coding.empty()) {
        ++codings;
        if (!HeaderNameEquals(coding, "chunked")) only_chunked = false;
      }
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  if (has_te) {
    if (codings != 1 || !only_chunked) {
      return HeaderRejection{
          "bad_request",
          "The request's Transfer-Encoding must be exactly 'chunked' "
          "(RFC 9112 §6.1); this server supports no other transfer "
          "coding."};
    }
    if (has_length) {
      return HeaderRejection{
          "bad_request",
          "The request has both Transfer-Encoding and Content-Length "
          "(RFC 9112 §6.1): its length is ambiguous."};
    }
  }
  if (authorizations > 1) {
    return HeaderRejection{
        "authorization_ambiguous",
        "The request has more than one Authorization header; send one."};
  }
  return std::nullopt;
}

}  // namespace idem::asio
