#include "idem/restinio/convert.h"

#include <string>

#include "idem/problem.h"

namespace idem::restinio {

std::vector<HeaderView> HeaderViews(const ::restinio::request_t& request) {
  std::vector<HeaderView> views;
  views.reserve(request.header().fields_count());
  for (const auto& field : request.header()) {
    views.emplace_back(field.name(), field.value());
  }
  return views;
}

void Send(::restinio::request_t& request, const idem::Response& response,
          bool close) {
  auto builder = request.create_response(::restinio::http_status_line_t(
      ::restinio::http_status_code_t(
          static_cast<std::uint16_t>(response.status)),
      std::string(StatusPhrase(response.status))));
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

void SendProblem(::restinio::request_t& request, int status,
                 std::string_view code, std::string detail, bool close) {
  Problem problem;
  problem.status = status;
  problem.code = code;
  problem.detail = std::move(detail);
  const std::string_view target = request.header().request_target();
  problem.instance = target.substr(0, target.find('?'));
  Send(request, MakeProblemResponse(problem), close);
}

}  // namespace idem::restinio
