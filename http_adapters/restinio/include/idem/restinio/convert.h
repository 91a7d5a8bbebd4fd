// Conversions between RESTinio's request and response types and idem's
// framework-agnostic ones.
//
// Thread-safety: pure functions, except Send, which may be called from any
// thread (RESTinio hands the response to the connection's own executor).

#ifndef IDEM_RESTINIO_CONVERT_H_
#define IDEM_RESTINIO_CONVERT_H_

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

// The reason phrase of `status` (RFC 9110 §15), or "" for one it does not
// name (a client must ignore the phrase, RFC 9112 §4).
std::string_view ReasonPhrase(int status);

// Answers `request` with `response`: its status, its headers except framing
// ones (Content-Length, Transfer-Encoding, Connection: RESTinio writes its
// own), its body. `close`: Connection: close, and RESTinio closes after it.
void Send(::restinio::request_t& request, const idem::Response& response,
          bool close = false);

}  // namespace idem::restinio

#endif  // IDEM_RESTINIO_CONVERT_H_
