// Conversions between RESTinio's request and response types and idem's
// framework-agnostic ones.
//
// Thread-safety: pure functions, except Send, which may be called from any
// thread (RESTinio hands the response to the connection's own executor).

#ifndef IDEM_RESTINIO_CONVERT_H_
#define IDEM_RESTINIO_CONVERT_H_

#include <string>
#include <string_view>
#include <vector>

#include <restinio/request_handler.hpp>

#include "idem/guard.h"
#include "idem/response.h"

namespace idem::restinio {

// Every header field of `request` as views into it, in order, repeats
// included (RESTinio keeps repeated fields apart). A chunked body's trailer
// is not among them: RESTinio keeps it in chunked_input_info().
std::vector<HeaderView> HeaderViews(const ::restinio::request_t& request);

// Answers `request` with `response`: its status (reason phrase: core's
// StatusPhrase), its headers except framing
// ones (Content-Length, Transfer-Encoding, Connection: RESTinio writes its
// own), its body. `close`: Connection: close, and RESTinio closes after it.
void Send(::restinio::request_t& request, const idem::Response& response,
          bool close = false);

// Answers `request` with the problem `status`/`code`/`detail`
// (problem.h), its instance the request's path; `close` as for Send.
void SendProblem(::restinio::request_t& request, int status,
                 std::string_view code, std::string detail, bool close);

}  // namespace idem::restinio

#endif  // IDEM_RESTINIO_CONVERT_H_
