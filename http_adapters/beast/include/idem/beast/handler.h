// The application's request handler, in any of three forms, behind one type.
//
// The adapter wraps the `handle_request` seam of a Beast server: a function
// from a request to a response. Applications write it as they like:
//
//   1. synchronous:          Response(Request req)
//   2. C++20 coroutine:      asio::awaitable<Response>(Request req)
//   3. completion handler:   void(Request req, Responder done)
//                            (call done(response) or done.Fail(exception)
//                            exactly once, from any thread)
//   4-6. the same taking the request's claim after the request:
//        Response(Request, ClaimHandle&), asio::awaitable<Response>(Request,
//        ClaimHandle&), void(Request, ClaimHandle&, Responder): valid until
//        the handler completes, inactive when the request is unprotected,
//        for RunInTransaction (transaction.h; idem/asio/handler.h).
//
// `Request` may also be taken as `Request&&` (the adapter keeps the request
// alive until the handler completes). Handler (below; the shared
// idem::asio::BasicHandler) detects the form from the callable's signature. A
// synchronous handler runs on the thread that called the adapter (an I/O
// thread): it must not block; use a coroutine or a completion handler for
// anything slow.
//
// Thread-safety: a Handler may be invoked concurrently from many threads;
// the wrapped callable must allow that. A Responder is single-owner.

#ifndef IDEM_BEAST_HANDLER_H_
#define IDEM_BEAST_HANDLER_H_

#include <utility>  // Before Asio's coroutine headers; see idem/asio/handler.h.

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "idem/asio/handler.h"

namespace idem::beast {

namespace asio = boost::asio;
namespace http = boost::beast::http;

// The message types the adapter works with: bodies are held in memory, which
// idempotency needs anyway (the request body is fingerprinted, the response
// body stored).
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using RequestHeader = http::request_header<>;

// The completion of a completion-handler-form handler (idem/asio/handler.h):
// move-only; call exactly once. Destroying it uncalled completes the request
// with an error (std::runtime_error), so a lost Responder cannot hang a
// connection.
using Responder = ::idem::asio::BasicResponder<Response>;

// Any of the six forms, type-erased.
using Handler = ::idem::asio::BasicHandler<Request, Response>;

}  // namespace idem::beast

#endif  // IDEM_BEAST_HANDLER_H_
