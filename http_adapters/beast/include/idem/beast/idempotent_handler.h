// IdempotentHandler: the Idempotency-Key contract (SEMANTICS.md) around a
// Beast server's request handler.
//
// A Beast server reads a request in its session, passes it to a
// `handle_request` function and writes what comes back. IdempotentHandler
// is such a function: it wraps the application's handler (any form of
// handler.h), and leaves sessions, sockets and parsing to the server.
//
//   auto idem = IdempotentHandler::Create(guard, app_handler, options);
//   idem->Protect(http::verb::post, "/orders");            // guard defaults
//   idem->Protect(http::verb::put, "/carts/{id}", cart_options);
//   ...
//   // in the session, after http::async_read_header(stream, buf, parser):
//   if (auto ec = idem->ApplyBodyLimit(parser)) ... // as for a body_limit
//   http::async_read(stream, buf, parser, ...);
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

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>

#include "idem/beast/handler.h"
#include "idem/beast/route.h"
#include "idem/error.h"
#include "idem/guard.h"

namespace idem::beast {

// Who the key of a request belongs to (SEMANTICS.md, "scope"): the
// authenticated principal, or nullopt for an anonymous request. It must not
// block; it runs on the caller's thread.
using ScopeResolver =
    std::function<std::optional<std::string>(const RequestHeader&)>;

// Where the Guard's store calls run.
enum class StoreCalls {
  kAuto,    // Inline when the store's Info().name is "memory", else the pool.
  kInline,  // On the caller's thread (only for stores that never block).
  kPool,    // Always on the pool.
};

struct IdempotentHandlerOptions {
  // Threads of the pool that runs store calls; started only when store calls
  // go to the pool. Default: 4.
  std::size_t store_threads = 4;
  // Default: kAuto.
  StoreCalls store_calls = StoreCalls::kAuto;
  // Default: every request is anonymous.
  ScopeResolver scope;
  // The body limit for requests whose body idem does not bound (routes that
  // are not protected, requests that pass through unprotected). Protected
  // requests get their route's max_request_body. Default: 8 MiB.
  std::uint64_t default_body_limit = std::uint64_t{8} << 20;
};

class IdempotentHandler {
 public:
  // kInvalidArgument when `guard` or `handler` is missing.
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
        request.method(), {request.target().data(), request.target().size()});
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
  bool store_calls_inline() const { return !pool_; }

 private:
  IdempotentHandler(std::shared_ptr<Guard> guard, Handler handler,
                    IdempotentHandlerOptions options);

  // Whether a request to `route` with `header` will have its body
  // fingerprinted (and a larger body rejected).
  bool BodyIsBounded(const Route& route, const RequestHeader& header) const;

  asio::awaitable<Response> HandleProtected(const Route& route,
                                            Request request);

  // Runs `fn` (a store call) on the pool and resumes on the caller's
  // executor. Callers run `fn` inline instead when there is no pool. One
  // post to the pool and one back, with the coroutine's own handler: no
  // second coroutine (co_spawn would add a frame, an awaitable thread and
  // two type-erased work guards per call). `fn` lives in this frame, which
  // stays suspended until the handler resumes it.
  template <typename Fn>
  asio::awaitable<std::invoke_result_t<Fn&>> OnPool(Fn fn) {
    using Value = std::invoke_result_t<Fn&>;
    co_return co_await asio::async_initiate<const asio::use_awaitable_t<>,
                                            void(std::exception_ptr, Value)>(
        [this, &fn](auto handler) {
          // Keeps the caller's context running until the result is back.
          auto home = asio::prefer(asio::get_associated_executor(handler),
                                   asio::execution::outstanding_work.tracked);
          asio::post(pool_->get_executor(), [&fn, handler = std::move(handler),
                                             home = std::move(home)]() mutable {
            std::exception_ptr error;
            Value result{};
            try {
              result = fn();
            } catch (...) {
              error = std::current_exception();
            }
            asio::post(home, [handler = std::move(handler), error,
                              result = std::move(result)]() mutable {
              std::move(handler)(error, std::move(result));
            });
          });
        },
        asio::use_awaitable);
  }

  std::shared_ptr<Guard> guard_;
  Handler handler_;
  IdempotentHandlerOptions options_;
  RouteTable routes_;
  std::unique_ptr<asio::thread_pool> pool_;  // Null: store calls inline.
};

}  // namespace idem::beast

#endif  // IDEM_BEAST_IDEMPOTENT_HANDLER_H_
