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
//   if (auto rejected = CheckRequestHeader(parser.get()))   // request_checks.h
//     send 400 and close the connection;
//   if (auto ec = idem->ApplyBodyLimit(parser)) ... // as for a body_limit
//   const std::size_t fields = HeaderFieldCount(parser.get());
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

#include <atomic>
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

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>

#include "idem/beast/handler.h"
#include "idem/beast/route.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "idem/log.h"

namespace idem::beast {

// Who the key of a request belongs to (SEMANTICS.md, "scope"): the
// authenticated principal, or nullopt for an anonymous request. It must not
// block; it runs on the caller's thread.
using ScopeResolver =
    std::function<std::optional<std::string>(const RequestHeader&)>;

// Where the Guard's store calls run.
enum class StoreCalls {
  kAuto,    // Inline when the store's Info().calls_may_block is false, else
            // the pool.
  kInline,  // On the caller's thread (only for stores that never block).
  kPool,    // Always on the pool.
};

struct IdempotentHandlerOptions {
  // Threads of the pool that runs store calls; started only when store calls
  // go to the pool. 0: the store's Info().max_concurrent_calls (PostgreSQL:
  // its `pool`), or 4 when the store names none. More threads than the store
  // serves at once would only wait inside the store. Default: 0.
  std::size_t store_threads = 0;
  // How long a store call may wait on the pool's queue before it starts: the
  // deadline of every store call includes its wait in the queue. A claim
  // not started within it is answered as if the store were unreachable
  // (step 8: 503 `idempotency_store_unavailable` on a fail-closed route,
  // unprotected on a fail-open one) without calling the store; a Finish or
  // release not started within it is not made: logged, counted
  // `store_failed`, and the record stays in_progress until its lock
  // timeout. 0: the store's Info().acquire_timeout, or 5 s when the store
  // names none. Default: 0.
  std::chrono::milliseconds store_queue_timeout{0};
  // Where the adapter's own errors go (store calls it could not make in
  // time). Default: none.
  LogSink log;
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
  bool store_calls_inline() const { return !pool_; }
  // Threads of the store-call pool (0 when store calls run inline).
  std::size_t store_threads() const { return pool_ ? pool_threads_ : 0; }

 private:
  IdempotentHandler(std::shared_ptr<Guard> guard, Handler handler,
                    IdempotentHandlerOptions options);

  // The route of a request with `header` when the Guard holds its body to
  // the route's max_request_body (Guard::BodyIsBounded), else nullptr.
  const Route* BoundedRoute(const RequestHeader& header) const;

  asio::awaitable<Response> HandleProtected(const Route& route,
                                            Request request);

  // Runs `fn` (a store call) on the pool and resumes on the caller's
  // executor with its result, or with nullopt when no pool thread started
  // it within the queue timeout (then `fn` never runs). Callers run `fn`
  // inline instead when there is no pool. One post to the pool and one
  // back, with the coroutine's own handler, and a timer on the caller's
  // executor for the queue deadline: whichever of the pool thread and the
  // timer comes first takes the call. `fn` lives in this frame, which stays
  // suspended until the handler resumes it, and only the pool thread that
  // took the call touches it.
  template <typename Fn>
  asio::awaitable<std::optional<std::invoke_result_t<Fn&>>> OnPool(Fn fn) {
    using Value = std::invoke_result_t<Fn&>;
    using Out = std::optional<Value>;
    co_return co_await asio::async_initiate<const asio::use_awaitable_t<>,
                                            void(std::exception_ptr, Out)>(
        [this, &fn](auto handler) {
          using H = decltype(handler);
          // Keeps the caller's context running until the result is back.
          using Home =
              decltype(asio::prefer(asio::get_associated_executor(handler),
                                    asio::execution::outstanding_work.tracked));
          struct Call {
            Call(H h, asio::any_io_executor ex)
                : handler(std::move(h)),
                  home(asio::prefer(asio::get_associated_executor(handler),
                                    asio::execution::outstanding_work.tracked)),
                  timer(std::move(ex)) {}
            std::atomic<bool> taken{false};
            H handler;
            std::optional<Home> home;  // Reset by the timer when it wins.
            asio::steady_timer timer;
          };
          asio::any_io_executor ex = asio::get_associated_executor(handler);
          auto call = std::make_shared<Call>(std::move(handler), std::move(ex));
          call->timer.expires_after(queue_timeout_);
          call->timer.async_wait([call](const boost::system::error_code& ec) {
            if (ec || call->taken.exchange(true)) return;
            Home home = std::move(*call->home);
            call->home.reset();
            asio::post(home, [call] {
              std::move(call->handler)(std::exception_ptr(), Out());
            });
          });
          asio::post(pool_->get_executor(), [&fn, call]() mutable {
            if (call->taken.exchange(true)) return;  // Timed out in the queue.
            std::exception_ptr error;
            Out result;
            try {
              result.emplace(fn());
            } catch (...) {
              error = std::current_exception();
            }
            Home home = std::move(*call->home);
            asio::post(home,
                       [call, error, result = std::move(result)]() mutable {
                         call->timer.cancel();
                         std::move(call->handler)(error, std::move(result));
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
  std::size_t pool_threads_ = 0;
  std::chrono::milliseconds queue_timeout_{0};
  // Answers the requests whose claim did not start in time: the same
  // options, metrics and clock over a store that fails every call at once,
  // so that steps 1-3 and the route's on_store_error apply as they would
  // to an unreachable store.
  std::unique_ptr<Guard> unavailable_;
};

}  // namespace idem::beast

#endif  // IDEM_BEAST_IDEMPOTENT_HANDLER_H_
