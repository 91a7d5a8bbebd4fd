#include "idem/beast/convert.h"

#include <iterator>

namespace idem::beast {

std::vector<HeaderView> HeaderViews(const RequestHeader& header) {
  std::vector<HeaderView> views;
  views.reserve(
      static_cast<std::size_t>(std::distance(header.begin(), header.end())));
  for (const auto& field : header) {
    views.emplace_back(ToStd(field.name_string()), ToStd(field.value()));
  }
  return views;
}

idem::Response FromBeast(const Response& response) {
  idem::Response out;
  out.status = static_cast<int>(response.result_int());
  out.headers.reserve(static_cast<std::size_t>(
      std::distance(response.begin(), response.end())));
  for (const auto& field : response) {
    out.headers.emplace_back(std::string(ToStd(field.name_string())),
                             std::string(ToStd(field.value())));
  }
  out.body = response.body();
  return out;
}

idem::Response FromBeast(const Response& response,
                         const std::vector<std::string>& headers) {
  idem::Response out;
  out.status = static_cast<int>(response.result_int());
  out.headers.reserve(static_cast<std::size_t>(
      std::distance(response.begin(), response.end())));
  for (const auto& field : response) {
    const std::string_view name = ToStd(field.name_string());
    for (const std::string& wanted : headers) {
      if (HeaderNameEquals(name, wanted)) {
        out.headers.emplace_back(std::string(name),
                                 std::string(ToStd(field.value())));
        break;
      }
    }
  }
  out.body = response.body();
  return out;
}

void PreparePayload(Response& response) {
  response.prepare_payload();
  const unsigned status = response.result_int();
  if (status < 200 || status == 204 || status == 304) {
    response.erase(http::field::content_length);
  }
}

idem::Response ToStored(Response& response,
                        const std::vector<std::string>* stored_headers) {
  if (!response.has_content_length() && !response.chunked()) {
    PreparePayload(response);
  }
  return stored_headers != nullptr ? FromBeast(response, *stored_headers)
                                   : FromBeast(response);
}

Response ToBeast(const idem::Response& response, unsigned version,
                 bool keep_alive) {
  Response out;
  out.version(version);
  out.result(static_cast<unsigned>(response.status));
  for (const auto& [name, value] : response.headers) {
    // Framing is this message's own, never a stored one's.
    if (HeaderNameEquals(name, "Content-Length") ||
        HeaderNameEquals(name, "Transfer-Encoding")) {
      continue;
    }
    out.insert(name, value);
  }
  out.body() = response.body;
  out.keep_alive(keep_alive);
  PreparePayload(out);
  return out;
}

}  // namespace idem::beast
