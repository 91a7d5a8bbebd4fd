#include "idem/beast/request_checks.h"

#include <iterator>
#include <string_view>

#include "idem/beast/convert.h"

namespace idem::beast {
namespace {

bool IsOws(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsOws(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<HeaderRejection> CheckRequestHeader(const RequestHeader& header) {
  // Every coding of every Transfer-Encoding field, in order.
  std::size_t codings = 0;
  bool only_chunked = true;
  bool has_te = false;
  for (const auto& field : header) {
    if (field.name() != http::field::transfer_encoding) continue;
    has_te = true;
    std::string_view rest = ToStd(field.value());
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
    if (header.find(http::field::content_length) != header.end()) {
      return HeaderRejection{
          "bad_request",
          "The request has both Transfer-Encoding and Content-Length "
          "(RFC 9112 §6.1): its length is ambiguous."};
    }
  }
  if (header.count(http::field::authorization) > 1) {
    return HeaderRejection{
        "authorization_ambiguous",
        "The request has more than one Authorization header; send one."};
  }
  return std::nullopt;
}

std::size_t HeaderFieldCount(const RequestHeader& header) {
  return static_cast<std::size_t>(std::distance(header.begin(), header.end()));
}

void EraseTrailerFields(RequestHeader& header, std::size_t header_fields) {
  auto it = header.begin();
  for (std::size_t i = 0; i < header_fields && it != header.end(); ++i) ++it;
  while (it != header.end()) it = header.erase(it);
}

}  // namespace idem::beast
