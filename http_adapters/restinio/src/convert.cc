#include "idem/restinio/convert.h"

#include <string>

namespace idem::restinio {

std::vector<HeaderView> HeaderViews(const ::restinio::request_t& request) {
  std::vector<HeaderView> views;
  views.reserve(request.header().fields_count());
  for (const auto& field : request.header()) {
    views.emplace_back(field.name(), field.value());
  }
  return views;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 203:
      return "Non-Authoritative Information";
    case 204:
      return "No Content";
    case 205:
      return "Reset Content";
    case 206:
      return "Partial Content";
    case 300:
      return "Multiple Choices";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 402:
      return "Payment Required";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 411:
      return "Length Required";
    case 412:
      return "Precondition Failed";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 425:
      return "Too Early";
    case 428:
      return "Precondition Required";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

void Send(::restinio::request_t& request, const idem::Response& response,
          bool close) {
  auto builder = request.create_response(::restinio::http_status_line_t(
      ::restinio::http_status_code_t(
          static_cast<std::uint16_t>(response.status)),
      std::string(ReasonPhrase(response.status))));
  for (const auto& [name, value] : response.headers) {
    // Framing is this message's own, never a stored one's.
    if (HeaderNameEquals(name, "Content-Length") ||
        HeaderNameEquals(name, "Transfer-Encoding") ||
        HeaderNameEquals(name, "Connection")) {
      continue;
    }
    builder.append_header(name, value);
  }
  if (close) builder.connection_close();
  builder.set_body(response.body);
  builder.done();
}

}  // namespace idem::restinio
