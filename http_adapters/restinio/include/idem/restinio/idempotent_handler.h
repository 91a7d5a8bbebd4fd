// IdempotentHandler: the Idempotency-Key contract (SEMANTICS.md) in front
// of a RESTinio 0.6 server's own request handlers.
//
// RESTinio handlers answer by calling req->create_response()...done()
// themselves, so idem cannot wrap a finished answer: the protected handler
// returns an idem::Response instead (handler.h), which the adapter stores
// and then sends. Two ways to plug it in:
//
//   // 1. express_router_t: wrap each protected route's handler.
//   auto router = std::make_unique<restinio::router::express_router_t<>>();
//   router->http_post("/orders", idem->Wrap(create_order));
//   router->http_put("/carts/:id", idem->Wrap(put_cart, cart_options,
//                                             "/carts/{id}"));
//
//   // 2. sync_chain::fixed_size_chain_t: idem's chain handler answers the
//   //    routes given to Protect and passes every other request on.
//   idem->Protect(restinio::http_method_post(), "/orders", create_order);
//   settings.request_handler(idem->ChainHandler(), other_handlers);
//
//   // Either way, RESTinio's limits must leave room for idem's (below):
//   settings.max_pipelined_requests(1)  // RESTinio's default
//       .incoming_http_msg_limits(restinio::incoming_http_msg_limits_t{}
//                                     .max_body_size(idem->BodyLimit()))
//       .handle_request_timeout(handler_time + idem->RequestTimeoutNeeded());
//
// Bodies: RESTinio reads a whole body before it calls a handler, and closes
// the connection without an answer when the body is over its own
// max_body_size. BodyLimit() is the largest body idem lets through (the
// largest max_request_body of any protected route, or default_body_limit):
// set RESTinio's limit to it, and a body over a route's max_request_body
// (but within RESTinio's) gets idem's 413 `request_too_large` with
// Connection: close; an unprotected request's body over default_body_limit
// gets the same 413 from the chain handler. Memory per connection is
// bounded by BodyLimit().
//
// Timeouts: RESTinio closes a connection whose handler has not answered
// within handle_request_timeout (default 10 s). A protected request may
// wait lock_wait for a duplicate, and each store call may wait the
// store-call queue timeout, before its handler runs: RequestTimeoutNeeded()
// is that, and CheckRequestTimeout refuses a RESTinio timeout that does not
// cover it. When RESTinio's timeout fires anyway (a slow handler), the
// connection closes but the request goes on: its response is still stored,
// so the client's retry gets the replay, never a second run.
//
// Store calls run as in the Beast adapter (idem/asio/guard_calls.h): on a
// pool when the store may block, inline otherwise. A synchronous handler on
// a route without lock_wait, with inline store calls, runs straight through
// on the RESTinio thread; everything else runs as a coroutine on
// `executor` and answers from there. A handler that throws (or Fail()s its
// Responder) has its key released and gets a 500 problem `internal_error`
// with Connection: close.
//
// Thread-safety: Protect and Wrap are for set-up, before the server starts.
// Everything else may be called concurrently from any number of threads.
// The IdempotentHandler must outlive the server; destroying it waits for
// the store calls in flight on its pool.

#ifndef IDEM_RESTINIO_IDEMPOTENT_HANDLER_H_
#define IDEM_RESTINIO_IDEMPOTENT_HANDLER_H_

#include <utility>  // Before Asio's coroutine headers; see idem/asio/handler.h.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <restinio/request_handler.hpp>
#include <restinio/router/express.hpp>

#include "idem/asio/guard_calls.h"
#include "idem/asio/shared_scope.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "idem/restinio/handler.h"
#include "idem/route.h"

namespace idem::restinio {

// Who the key of a request belongs to (SEMANTICS.md, "scope"): a function
// of the request returning the authenticated principal, or nullopt for an
// anonymous request; or ::idem::asio::SharedScope() (shared_scope.h). It
// must not block; it runs on the RESTinio thread.
using ScopeResolver = ::idem::asio::ScopeResolver<::restinio::request_t>;

// The store-call fields (store_threads, store_queue_timeout, log,
// store_calls) are GuardCallOptions' (idem/asio/guard_calls.h).
struct IdempotentHandlerOptions : ::idem::asio::GuardCallOptions {
  // Required: Create refuses an unset one (shared_scope.h says why and
  // when SharedScope() is safe). No default.
  ScopeResolver scope;
  // The body limit for requests whose body idem does not bound (routes that
  // are not protected, requests that pass through unprotected). Protected
  // requests get their route's max_request_body. Default: 8 MiB.
  std::uint64_t default_body_limit = std::uint64_t{8} << 20;
};

// What RESTinio's chain and router call.
using ChainHandlerFn =
    std::function<::restinio::request_handling_status_t(const RequestHandle&)>;

class IdempotentHandler {
 public:
  // kInvalidArgument when `guard`, `executor` or options.scope is missing.
  // `executor` runs the requests that do not run straight through (usually the
  // server's io_context).
  static Result<std::unique_ptr<IdempotentHandler>> Create(
      std::shared_ptr<Guard> guard, boost::asio::any_io_executor executor,
      IdempotentHandlerOptions options = {});

  IdempotentHandler(const IdempotentHandler&) = delete;
  IdempotentHandler& operator=(const IdempotentHandler&) = delete;
  ~IdempotentHandler();

  // For ChainHandler: protects requests with `method` whose path matches
  // `pattern` (idem/route.h: "/orders/{id}"), answered by `handler`, with
  // `options`, or the guard's own when null. Routes are tried in the order
  // they were added. kInvalidArgument for a bad pattern, options or a
  // missing handler.
  Status Protect(::restinio::http_method_id_t method, std::string_view pattern,
                 Handler handler,
                 std::shared_ptr<const GuardOptions> options = nullptr);

  // For express_router_t: `handler` protected with `options` (or the
  // guard's), as a route handler. `route` names the operation
  // (RequestView::route; empty: the request's path). Throws
  // std::invalid_argument for invalid options or a missing handler (it is
  // called where routes are registered, at start-up).
  ::restinio::router::express_request_handler_t Wrap(
      Handler handler, std::shared_ptr<const GuardOptions> options = nullptr,
      std::string route = {});

  // A handler for a sync_chain::fixed_size_chain_t (or RESTinio's
  // request_handler itself): answers the routes given to Protect; 413 for
  // any other request whose body is over default_body_limit; otherwise
  // request_not_handled(), so the chain goes on.
  ChainHandlerFn ChainHandler();

  // The max_body_size RESTinio needs (see above).
  std::uint64_t BodyLimit() const;

  // What handle_request_timeout must cover besides the handler's own time:
  // the longest lock_wait of any route, plus two store-call queue waits
  // (the claim and the Finish) when store calls run on the pool.
  std::chrono::milliseconds RequestTimeoutNeeded() const;

  // kInvalidArgument, saying what it must cover, when
  // `handle_request_timeout` is not longer than RequestTimeoutNeeded().
  Status CheckRequestTimeout(
      std::chrono::steady_clock::duration handle_request_timeout) const;

  Guard& guard() { return *guard_; }
  // Whether store calls run inline (see idem/asio/guard_calls.h).
  bool store_calls_inline() const { return calls_->store_calls_inline(); }
  // For the server's shutdown, after its I/O threads stopped and before its
  // I/O context goes: waits for the store calls in flight (GuardCalls::
  // JoinPool). The handler serves no request afterwards.
  void JoinStoreCalls() { calls_->JoinPool(); }
  std::size_t store_threads() const { return calls_->store_threads(); }

 private:
  // One protected handler: its options, its route's name, its handler;
  // for Protect's routes also the method and pattern to match.
  struct Entry {
    std::shared_ptr<const GuardOptions> options;
    std::string route;
    Handler handler;
    std::string method;
    std::optional<RoutePattern> pattern;
  };

  IdempotentHandler(std::shared_ptr<Guard> guard,
                    boost::asio::any_io_executor executor,
                    IdempotentHandlerOptions options,
                    std::unique_ptr<::idem::asio::GuardCalls> calls);

  Result<std::shared_ptr<const GuardOptions>> RouteOptions(
      std::shared_ptr<const GuardOptions> options) const;
  ::restinio::request_handling_status_t Handle(const RequestHandle& request,
                                               const Entry& entry);
  boost::asio::awaitable<void> HandleAsync(RequestHandle request,
                                           const Entry* entry);
  // HandleAsync's decision, with the request's view in this frame.
  boost::asio::awaitable<Decision> Decide(const RequestHandle& request,
                                          const Entry& entry);

  std::shared_ptr<Guard> guard_;
  boost::asio::any_io_executor executor_;
  IdempotentHandlerOptions options_;
  // Protect's routes, tried in order, and Wrap's; deques for stable
  // addresses (the handlers hold pointers).
  std::deque<Entry> routes_;
  std::deque<Entry> wrapped_;
  std::unique_ptr<::idem::asio::GuardCalls> calls_;
};

}  // namespace idem::restinio

#endif  // IDEM_RESTINIO_IDEMPOTENT_HANDLER_H_
