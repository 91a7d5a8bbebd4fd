// IdempotentHandler: the Idempotency-Key contract (SEMANTICS.md) around a
// Beast server's request handler.
//
// A Beast server reads a request in its session, passes it to a
// `handle_request` function and writes what comes back. IdempotentHandler
// is such a function: it wraps the application's handler (any form of
// handler.h), and leaves sessions, sockets and parsing to the server.
//
//   options.scope = ...;  // the principal, or ::idem::asio::SharedScope()
//   auto idem = IdempotentHandler::Create(guard, app_handler, options);
//   idem->Protect(http::verb::post, "/orders");            // guard defaults
//   idem->Protect(http::verb::put, "/carts/{id}", cart_options);
//   ...
//   // in the session, after http::async_read_header(stream, buf, parser):
//   if (auto rejected = CheckRequestHeader(parser.get()))   // request_checks.h
//     send 400 and close the connection;
//   if (auto ec = idem->ApplyBodyLimit(parser)) ... // as for a body_limit
//   const auto fields = HeaderFieldIds(parser.get());
//   http::async_read(stream, buf, parser, ...);
//   EraseTrailerFields(parser.get(), fields);  // keys come from the header
//   if (ec == http::error::body_limit)
//     send idem->TooLarge(parser.get()) and close the connection;
//   Response res = co_await (*idem)(parser.release());   // or AsyncHandle
//
// Requests to routes that were not protected go straight to the handler.
// For protected ones, the Guard's store calls (which may block on a durable
// or remote store) run on a thread pool the IdempotentHandler owns, never on
// the caller's thread, and the request resumes on the caller's executor.
// With the in-memory store they run inline: they never block. Waiting for an
// in-progress request (lock_wait) uses an Asio timer on the caller's
// executor.
//
// The handler's response is stored before the adapter returns it, so it is
// durable before the session writes it. Replays carry the stored status,
// headers and body, the replay header and a recomputed Content-Length.
// When the handler throws (or Fail()s its Responder), the key is released
// and the exception propagates to the caller, i.e. the server's own error
// handling.
//
// Thread-safety: Protect is for set-up, before the first request. Everything
// else may be called concurrently from any number of threads. The
// IdempotentHandler must outlive every request it is handling; destroying it
// waits for the store calls in flight on its pool.

#ifndef IDEM_BEAST_IDEMPOTENT_HANDLER_H_
#define IDEM_BEAST_IDEMPOTENT_HANDLER_H_

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>

#include "idem/asio/guard_calls.h"
#include "idem/asio/shared_scope.h"
#include "idem/beast/handler.h"
#include "idem/beast/route.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "idem/log.h"

namespace idem::beast {

// Who the key of a request belongs to (SEMANTICS.md, "scope"): a function
// of the request header returning the authenticated principal, or nullopt
// for an anonymous request; or ::idem::asio::SharedScope() (shared_scope.h).
// It must not block; it runs on the caller's thread.
using ScopeResolver = ::idem::asio::ScopeResolver<RequestHeader>;

// Where the Guard's store calls run (guard_calls.h).
using StoreCalls = ::idem::asio::StoreCalls;

// The store-call fields (store_threads, store_queue_timeout, log,
// store_calls) are GuardCallOptions' (guard_calls.h).
struct IdempotentHandlerOptions : ::idem::asio::GuardCallOptions {
  // Required: Create refuses an unset one (shared_scope.h says why and
  // when SharedScope() is safe). No default.
  ScopeResolver scope;
  // The body limit for requests whose body idem does not bound (routes that
  // are not protected, requests that pass through unprotected). Protected
  // requests get their route's max_request_body. Default: 8 MiB.
  std::uint64_t default_body_limit = std::uint64_t{8} << 20;
};

class IdempotentHandler {
 public:
  // kInvalidArgument when `guard`, `handler` or options.scope is missing.
  static Result<std::unique_ptr<IdempotentHandler>> Create(
      std::shared_ptr<Guard> guard, Handler handler,
      IdempotentHandlerOptions options = {});

  IdempotentHandler(const IdempotentHandler&) = delete;
  IdempotentHandler& operator=(const IdempotentHandler&) = delete;
  ~IdempotentHandler();

  // Protects requests with `method` whose path matches `pattern` (route.h),
  // with `options`, or the guard's own when null. Routes are tried in the
  // order they were added. kInvalidArgument for a bad pattern or options.
  Status Protect(http::verb method, std::string_view pattern,
                 std::shared_ptr<const GuardOptions> options = nullptr);

  // The largest body the server should read for a request with `header`:
  // the route's max_request_body when idem will fingerprint the body (and
  // reject a larger one), default_body_limit otherwise.
  std::uint64_t BodyLimit(const RequestHeader& header) const;

  // For sessions that read with an http::request_parser: call after
  // async_read_header, before reading the body. Sets the parser's body_limit
  // to BodyLimit(header) and returns http::error::body_limit at once when
  // the declared Content-Length is already over it (Beast checks a declared
  // length only while parsing the header, before the limit could depend on
  // it). Either way a body_limit error is answered with TooLarge().
  // A request whose framing CheckRequestHeader (request_checks.h) rejects
  // returns
  // http::error::bad_transfer_encoding: answer 400 and close the
  // connection without reading its body.
  boost::beast::error_code ApplyBodyLimit(
      http::request_parser<http::string_body>& parser) const;

  // The answer to a request whose body went over BodyLimit: the 413 problem
  // `request_too_large` (or the 400 a missing or invalid key gets first),
  // counted in the guard's metrics. The body was not read, so the response
  // says Connection: close and the session must close after writing it.
  Response TooLarge(const RequestHeader& header);

  // Handles one request: for coroutine sessions. Must be awaited on the
  // connection's executor (strand); resumes there. A request to a route that
  // is not protected is the handler's own awaitable, with nothing added.
  asio::awaitable<Response> operator()(Request request) {
    const Route* route = routes_.Match(
        {request.method_string().data(), request.method_string().size()},
        {request.target().data(), request.target().size()});
    if (route == nullptr) return handler_(std::move(request));
    return HandleProtected(*route, std::move(request));
  }

  // Handles one request for callback sessions: calls
  // `token(std::exception_ptr, Response)` on `executor` (any completion token
  // with that signature works). A handler exception arrives as the
  // exception_ptr.
  template <typename Executor, typename CompletionToken>
  auto AsyncHandle(const Executor& executor, Request request,
                   CompletionToken&& token) {
    return asio::co_spawn(executor, (*this)(std::move(request)),
                          std::forward<CompletionToken>(token));
  }

  Guard& guard() { return *guard_; }
  const RouteTable& routes() const { return routes_; }
  // Whether store calls run inline (see StoreCalls).
  bool store_calls_inline() const { return calls_->store_calls_inline(); }
  // Threads of the store-call pool (0 when store calls run inline).
  std::size_t store_threads() const { return calls_->store_threads(); }
  // For the server's shutdown, after its I/O threads stopped and before its
  // I/O context goes: waits for the store calls in flight (GuardCalls::
  // JoinPool), whose completions are posted to that context. The handler
  // serves no request afterwards.
  void JoinStoreCalls() { calls_->JoinPool(); }

 private:
  IdempotentHandler(std::shared_ptr<Guard> guard, Handler handler,
                    IdempotentHandlerOptions options,
                    std::unique_ptr<::idem::asio::GuardCalls> calls);

  // The route of a request with `header` when the Guard holds its body to
  // the route's max_request_body (Guard::BodyIsBounded), else nullptr.
  const Route* BoundedRoute(const RequestHeader& header) const;

  // A protected route's request, in three coroutines so that no frame
  // passes about 1 KiB, past which each one costs a trip through malloc's
  // large-request path on every request (see GuardCalls, "Decide's and
  // Continue's steps"): the decision (with the request's view), then the
  // handler, unprotected or under the claim with the completion after it.
  asio::awaitable<Response> HandleProtected(const Route& route,
                                            Request request);
  asio::awaitable<Decision> Decide(const Route& route, const Request& request);
  // `request` and `d` are HandleProtected's, which outlives this.
  asio::awaitable<Response> Run(const Route& route, Request& request,
                                Decision& d);

  std::shared_ptr<Guard> guard_;
  Handler handler_;
  IdempotentHandlerOptions options_;
  RouteTable routes_;
  // Store calls, lock_wait and a throwing handler: the Asio adapters'
  // shared part.
  std::unique_ptr<::idem::asio::GuardCalls> calls_;
};

}  // namespace idem::beast

#endif  // IDEM_BEAST_IDEMPOTENT_HANDLER_H_
