#include "idem/problem.h"

#include <nlohmann/json.hpp>

namespace idem {

std::string_view StatusPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 422:
      return "Unprocessable Content";
    case 425:
      return "Too Early";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Unknown Status";
  }
}

Response MakeProblemResponse(const Problem& problem) {
  nlohmann::ordered_json body;
  body["type"] = problem.type;
  body["title"] = StatusPhrase(problem.status);
  body["status"] = problem.status;
  body["detail"] = problem.detail;
  // A request the HTTP parser rejected has no path: omit the member rather
  // than send an empty URI reference.
  if (!problem.instance.empty()) body["instance"] = problem.instance;
  body["code"] = problem.code;
  Response r;
  r.status = problem.status;
  r.headers.emplace_back("Content-Type", std::string(kProblemContentType));
  if (problem.retry_after > Duration::zero()) {
    const auto secs =
        std::chrono::ceil<std::chrono::seconds>(problem.retry_after);
    r.headers.emplace_back("Retry-After", std::to_string(secs.count()));
  }
  // Invalid UTF-8 in a path must not throw: replace it.
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

}  // namespace idem
