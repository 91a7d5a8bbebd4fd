// The application's request handler behind the RESTinio adapter: the forms
// of idem/asio/handler.h over RESTinio's request handle, answering with an
// idem::Response (status, headers, body) instead of calling
// create_response() itself, so that the adapter can store the answer before
// it is sent:
//
//   1. synchronous:         idem::Response(RequestHandle req)
//   2. C++20 coroutine:     boost::asio::awaitable<idem::Response>(
//                               RequestHandle req)
//   3. completion handler:  void(RequestHandle req, Responder done)
//                           (call done(response) or done.Fail(exception)
//                           exactly once, from any thread)
//   4-6. the same taking the request's claim after the request
//        (RequestHandle, ClaimHandle&[, Responder]): valid until the handler
//        completes, inactive when the request is unprotected, for
//        RunInTransaction (transaction.h; idem/asio/handler.h).
//
// A synchronous handler runs on the RESTinio thread that received the
// request: it must not block; use a coroutine or a completion handler (and
// answer from another thread) for anything slow. The response's framing
// (Content-Length, Transfer-Encoding, Connection) is RESTinio's: such
// headers in it are dropped.
//
// Thread-safety: a Handler may be invoked concurrently from many threads;
// the wrapped callable must allow that. A Responder is single-owner.

#ifndef IDEM_RESTINIO_HANDLER_H_
#define IDEM_RESTINIO_HANDLER_H_

#include <utility>  // Before Asio's coroutine headers; see idem/asio/handler.h.

#include <restinio/request_handler.hpp>

#include "idem/asio/handler.h"
#include "idem/response.h"

namespace idem::restinio {

using RequestHandle = ::restinio::request_handle_t;
using Response = ::idem::Response;
// Move-only; call exactly once. Destroying it uncalled completes the request
// with an error (std::runtime_error), so a lost Responder cannot hang a
// connection.
using Responder = ::idem::asio::BasicResponder<Response>;
using Handler = ::idem::asio::BasicHandler<RequestHandle, Response>;

}  // namespace idem::restinio

#endif  // IDEM_RESTINIO_HANDLER_H_
