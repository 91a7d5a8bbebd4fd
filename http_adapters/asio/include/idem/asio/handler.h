// An adapter's view of the application's request handler, in any of six
// forms, behind one type, for any request and response types:
//
//   1. synchronous:          Response(Request req)
//   2. C++20 coroutine:      net::awaitable<Response>(Request req)
//   3. completion handler:   void(Request req, BasicResponder<Response> done)
//                            (call done(response) or done.Fail(exception)
//                            exactly once, from any thread)
//   4-6. the same, also taking the request's claim (idem/guard.h), after
//      the request:          Response(Request, ClaimHandle&)
//                            net::awaitable<Response>(Request, ClaimHandle&)
//                            void(Request, ClaimHandle&, Responder)
//      e.g. to complete the idempotency record in the handler's own SQL
//      transaction (idem/sql_transaction.h; the adapters' RunInTransaction).
//      The claim is valid until the handler completes (returns, or calls
//      its Responder) and must not be touched afterwards; it is inactive
//      when the request runs unprotected (no key on an optional route, a
//      route idem does not protect, fail-open, switched off). The handler
//      may use it from the thread it completes on (a pool), never finish,
//      abandon or move it: the adapter does. Lock renewal goes on while it
//      runs.
//
// `Request` may also be taken as `Request&&` (the adapter keeps the request
// alive until the handler completes). BasicHandler detects the form from the
// callable's signature. A synchronous handler runs on the thread that called
// the adapter (an I/O thread): it must not block; use a coroutine or a
// completion handler for anything slow. idem::beast and idem::restinio name
// their own instances (Handler, Responder).
//
// Thread-safety: a BasicResponder is single-owner.

#ifndef IDEM_ASIO_HANDLER_H_
#define IDEM_ASIO_HANDLER_H_

// Boost 1.74's Asio coroutine headers use std::exchange without including
// <utility>; GCC 12's standard library no longer includes it transitively.
#include <utility>

#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "idem/guard.h"

namespace idem::asio {

namespace net = boost::asio;

// The completion of a completion-handler-form handler. Move-only; call
// exactly once. Destroying it uncalled completes the request with an error
// (std::runtime_error), so a lost Responder cannot hang a connection.
//
// Calling it posts to the connection's I/O context, and until it is called
// it holds work on that context. A server that shuts down must therefore
// let every thread holding a Responder finish with it (join the
// application's pool) before it destroys its I/O context: Asio allows no
// post to a context being destroyed. Once the call returns, nothing of the
// Responder touches the context any more.
template <typename Response>
class BasicResponder {
 public:
  BasicResponder() = default;
  template <typename CompletionHandler>
  explicit BasicResponder(CompletionHandler handler)
      : impl_(std::make_unique<Impl<CompletionHandler>>(std::move(handler))) {}
  BasicResponder(BasicResponder&&) = default;
  BasicResponder& operator=(BasicResponder&& other) noexcept {
    if (this != &other) {
      Drop();
      impl_ = std::move(other.impl_);
    }
    return *this;
  }
  ~BasicResponder() { Drop(); }

  // Completes the request with `response`.
  void operator()(Response response) {
    if (auto impl = std::move(impl_))
      impl->Complete(nullptr, std::move(response));
  }
  // Completes the request with an error: the adapter releases the key, and
  // rethrows `error` to the server's own error handling.
  void Fail(std::exception_ptr error) {
    if (auto impl = std::move(impl_)) impl->Complete(error, Response());
  }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual void Complete(std::exception_ptr error, Response response) = 0;
  };
  template <typename H>
  struct Impl final : Base {
    explicit Impl(H h)
        : handler(std::move(h)), work(net::get_associated_executor(handler)) {}
    void Complete(std::exception_ptr error, Response response) override {
      // Posted, not called: the handler may be called from the initiating
      // function itself or from a foreign thread, and the caller's coroutine
      // must resume on its own executor either way. The work travels with
      // the completion and ends on the executor's thread: once the post
      // returns, this thread holds nothing that touches the I/O context,
      // which may be gone as soon as the response is sent.
      const auto ex = Untracked(work.get_executor());
      net::post(ex, [h = std::move(handler), w = std::move(work), error,
                     r = std::move(response)]() mutable {
        w.reset();
        h(error, std::move(r));
      });
    }
    template <typename Executor>
    static auto Untracked(const Executor& ex) {
      if constexpr (net::execution::is_executor<Executor>::value) {
        return net::prefer(ex, net::execution::outstanding_work.untracked);
      } else {
        return ex;
      }
    }
    H handler;
    net::executor_work_guard<net::associated_executor_t<H>> work;
  };

  void Drop() {
    if (impl_) {
      Fail(std::make_exception_ptr(
          std::runtime_error("request handler dropped its Responder")));
    }
  }

  std::unique_ptr<Base> impl_;
};

// Any of the six forms, type-erased.
//
// Thread-safety: a BasicHandler may be invoked concurrently from many
// threads; the wrapped callable must allow that.
template <typename Request, typename Response>
class BasicHandler {
 public:
  using Responder = BasicResponder<Response>;

  BasicHandler() = default;

  template <typename F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, BasicHandler>) BasicHandler(
      F f) {  // NOLINT(google-explicit-constructor): a handler is a handler.
    using Fn = std::remove_cvref_t<F>;
    // The forwarding lambdas are not coroutines themselves: the coroutines
    // are the functions below, which own what they use as parameters
    // (GCC 12 mishandles captures of coroutine lambdas).
    constexpr bool kCompletionWithClaim =
        std::is_invocable_v<Fn&, Request&&, ClaimHandle&, Responder&&>;
    constexpr bool kCoroutineWithClaim =
        std::is_invocable_r_v<net::awaitable<Response>, Fn&, Request&&,
                              ClaimHandle&>;
    constexpr bool kSyncWithClaim =
        std::is_invocable_r_v<Response, Fn&, Request&&, ClaimHandle&>;
    takes_claim_ =
        kCompletionWithClaim || kCoroutineWithClaim || kSyncWithClaim;
    if constexpr (kCompletionWithClaim ||
                  std::is_invocable_v<Fn&, Request&&, Responder&&>) {
      auto shared = std::make_shared<Fn>(std::move(f));
      async_ = [shared](Request req, ClaimHandle* claim) {
        return CallCompletionForm(shared, std::move(req), claim);
      };
    } else if constexpr (kCoroutineWithClaim ||
                         std::is_invocable_r_v<net::awaitable<Response>, Fn&,
                                               Request&&>) {
      auto shared = std::make_shared<Fn>(std::move(f));
      async_ = [shared](Request req, ClaimHandle* claim) {
        return CallCoroutineForm(shared, std::move(req), claim);
      };
    } else if constexpr (kSyncWithClaim) {
      sync_ = std::move(f);
    } else {
      static_assert(std::is_invocable_r_v<Response, Fn&, Request&&>,
                    "a handler is Response(Request), "
                    "net::awaitable<Response>(Request) or "
                    "void(Request, Responder), each optionally taking "
                    "ClaimHandle& after the request");
      sync_ = [fn = std::move(f)](Request&& req, ClaimHandle&) mutable {
        return fn(std::move(req));
      };
    }
  }

  explicit operator bool() const { return sync_ || async_; }
  bool synchronous() const { return static_cast<bool>(sync_); }
  // Whether the handler takes the request's ClaimHandle& (forms 4-6).
  bool takes_claim() const { return takes_claim_; }
  // Calls a synchronous handler (synchronous() must be true) on this thread,
  // with `claim`, or an inactive one.
  Response RunSynchronous(Request req) const {
    ClaimHandle unprotected;
    return sync_(std::move(req), unprotected);
  }
  Response RunSynchronous(Request req, ClaimHandle& claim) const {
    return sync_(std::move(req), claim);
  }

  // Runs the handler; a synchronous one runs inline. Not a coroutine itself,
  // so an asynchronous handler costs no extra frame. Without a claim, a
  // claim-taking handler gets an inactive one (the request is unprotected).
  net::awaitable<Response> operator()(Request req) const {
    if (sync_) return RunSync(&sync_, std::move(req), nullptr);
    return async_(std::move(req), nullptr);
  }
  // With the request's claim, which must stay valid until the awaitable
  // completes.
  net::awaitable<Response> operator()(Request req, ClaimHandle& claim) const {
    if (sync_) return RunSync(&sync_, std::move(req), &claim);
    return async_(std::move(req), &claim);
  }

 private:
  using SyncFn = std::function<Response(Request&&, ClaimHandle&)>;

  // `claim` null: the frame's own inactive claim stands in, alive until the
  // handler completes.
  static net::awaitable<Response> RunSync(const SyncFn* fn, Request req,
                                          ClaimHandle* claim) {
    ClaimHandle unprotected;
    co_return (*fn)(std::move(req), claim ? *claim : unprotected);
  }

  template <typename Fn>
  static decltype(auto) Call(Fn& fn, Request&& req, ClaimHandle& claim,
                             auto&&... rest) {
    if constexpr (std::is_invocable_v<Fn&, Request&&, ClaimHandle&,
                                      decltype(rest)...>) {
      return fn(std::move(req), claim, std::forward<decltype(rest)>(rest)...);
    } else {
      return fn(std::move(req), std::forward<decltype(rest)>(rest)...);
    }
  }

  template <typename Fn>
  static net::awaitable<Response> CallCompletionForm(std::shared_ptr<Fn> fn,
                                                     Request req,
                                                     ClaimHandle* claim) {
    ClaimHandle unprotected;
    ClaimHandle& c = claim ? *claim : unprotected;
    co_return co_await net::async_initiate<const net::use_awaitable_t<>,
                                           void(std::exception_ptr, Response)>(
        [&fn, &req, &c](auto handler) {
          Call(*fn, std::move(req), c, Responder(std::move(handler)));
        },
        net::use_awaitable);
  }

  // The frame owns the request for as long as the handler's coroutine runs,
  // so a handler taking `Request&&` cannot dangle.
  template <typename Fn>
  static net::awaitable<Response> CallCoroutineForm(std::shared_ptr<Fn> fn,
                                                    Request req,
                                                    ClaimHandle* claim) {
    ClaimHandle unprotected;
    co_return co_await Call(*fn, std::move(req), claim ? *claim : unprotected);
  }

  SyncFn sync_;
  std::function<net::awaitable<Response>(Request, ClaimHandle*)> async_;
  bool takes_claim_ = false;
};

}  // namespace idem::asio

#endif  // IDEM_ASIO_HANDLER_H_
