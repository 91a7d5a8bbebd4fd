// The forms a protected unary method's implementation may take: the
// application's code stays a function of (context, request) → (status,
// response), with `Context` = ::grpc::ServerContextBase& (the base of both
// CallbackServerContext and ServerContext), `Request` = const Req& and
// `Response` = Resp& (the message gRPC sends when the status is OK):
//
//   1. synchronous:  ::grpc::Status(Context, Request, Response)
//   2. coroutine:    net::awaitable<::grpc::Status>(Context, Request, Response)
//   3. completion:   void(Context, Request, Response, Done done)
//                    (call done(status) exactly once, from any thread; a
//                    Done destroyed uncalled fails the call: key released,
//                    UNKNOWN sent)
//
// each optionally taking a ReplyMetadata& after the response (before Done)
// for the metadata it sends (reply_metadata.h; the allowlisted keys are
// replayed). The context, request, response and ReplyMetadata stay valid
// until the handler completes (returns, its coroutine ends, or Done is
// called) and must not be touched afterwards.
//
// Where they run: with the callback API (IdempotentMethods::ProtectCallback)
// on the adapter's executor (IdempotentMethodsOptions::executor) when the
// store's calls may block. When they never block (memory:, no hop;
// idempotent_methods.h, "Threads"), every form is called on the gRPC
// thread that started the call: a synchronous handler runs there, a
// coroutine runs there until it first suspends and resumes on the
// executor (co_await this_coro::executor is the executor either way), and
// a completion handler's done() may come from any thread. Either way no
// handler may block, so anything slow (a wait, an RPC, a database) is a
// coroutine or a completion handler that suspends or completes later.
// With the synchronous API (ProtectSync) only form 1 is accepted, and it
// runs on the gRPC thread that serves the call, as any sync method does.
//
// A handler that throws (or fails its Done) has its key released and the
// client gets UNKNOWN; a handler that gives up because the call was
// cancelled (context.IsCancelled()) returns CANCELLED, which releases the
// key as well (not a stored status). A handler that does not give up runs
// to its end and its result is stored, whatever became of the client.
//
// Not offered here: the HTTP adapters' forms that take the request's
// ClaimHandle (completing the record in the handler's own SQL transaction).

#ifndef IDEM_GRPC_HANDLER_H_
#define IDEM_GRPC_HANDLER_H_

// Boost 1.74's Asio coroutine headers use std::exchange without including
// <utility>; GCC 12's standard library no longer includes it transitively.
#include <utility>

#include <memory>
#include <type_traits>

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>
#include <boost/asio/awaitable.hpp>

#include "idem/asio/handler.h"
#include "idem/grpc/reply_metadata.h"

namespace idem::grpc {

namespace net = boost::asio;

// What a completion-form handler calls with its status, once.
using Done = idem::asio::BasicResponder<::grpc::Status>;

// One call as the adapter hands it to a type-erased handler (messages as
// their protobuf base; the typed forms above cast them back).
struct CallArgs {
  ::grpc::ServerContextBase* context = nullptr;
  const google::protobuf::Message* request = nullptr;
  google::protobuf::Message* response = nullptr;
  ReplyMetadata* metadata = nullptr;
};

// Any of the forms, type-erased (idem::asio's BasicHandler over CallArgs).
using AnyHandler = idem::asio::BasicHandler<CallArgs, ::grpc::Status>;

namespace detail {

template <typename Req, typename Resp, typename F>
constexpr bool kCompletionWithMetadata =
    std::is_invocable_v<F&, ::grpc::ServerContextBase&, const Req&, Resp&,
                        ReplyMetadata&, Done&&>;
template <typename Req, typename Resp, typename F>
constexpr bool kCompletion = std::is_invocable_v<F&, ::grpc::ServerContextBase&,
                                                 const Req&, Resp&, Done&&>;
template <typename Req, typename Resp, typename F>
constexpr bool kCoroutineWithMetadata =
    std::is_invocable_r_v<net::awaitable<::grpc::Status>, F&,
                          ::grpc::ServerContextBase&, const Req&, Resp&,
                          ReplyMetadata&>;
template <typename Req, typename Resp, typename F>
constexpr bool kCoroutine =
    std::is_invocable_r_v<net::awaitable<::grpc::Status>, F&,
                          ::grpc::ServerContextBase&, const Req&, Resp&>;
template <typename Req, typename Resp, typename F>
constexpr bool kSyncWithMetadata =
    std::is_invocable_r_v<::grpc::Status, F&, ::grpc::ServerContextBase&,
                          const Req&, Resp&, ReplyMetadata&>;
template <typename Req, typename Resp, typename F>
constexpr bool kSync =
    std::is_invocable_r_v<::grpc::Status, F&, ::grpc::ServerContextBase&,
                          const Req&, Resp&>;

// Calls `f` with the call's typed messages, and the ReplyMetadata when it
// takes one; `rest` is Done or nothing.
template <typename Req, typename Resp, typename F, typename... Rest>
decltype(auto) Invoke(F& f, const CallArgs& a, Rest&&... rest) {
  auto& request = static_cast<const Req&>(*a.request);
  auto& response = static_cast<Resp&>(*a.response);
  if constexpr (std::is_invocable_v<F&, ::grpc::ServerContextBase&, const Req&,
                                    Resp&, ReplyMetadata&, Rest&&...>) {
    return f(*a.context, request, response, *a.metadata,
             std::forward<Rest>(rest)...);
  } else {
    return f(*a.context, request, response, std::forward<Rest>(rest)...);
  }
}

}  // namespace detail

// Whether `F` is a synchronous handler of Req → Resp (form 1).
template <typename Req, typename Resp, typename F>
constexpr bool kIsSyncHandler =
    detail::kSync<Req, Resp, F> || detail::kSyncWithMetadata<Req, Resp, F>;

// `f`, of any form, as an AnyHandler. The messages the adapter passes are
// the method's own Req and Resp (checked against the method's descriptor
// when it is protected).
template <typename Req, typename Resp, typename F>
AnyHandler MakeAnyHandler(F f) {
  static_assert(std::is_base_of_v<google::protobuf::Message, Req> &&
                    std::is_base_of_v<google::protobuf::Message, Resp>,
                "Req and Resp are the method's generated message types");
  using Fn = std::remove_cvref_t<F>;
  auto fn = std::make_shared<Fn>(std::move(f));
  if constexpr (detail::kCompletionWithMetadata<Req, Resp, Fn> ||
                detail::kCompletion<Req, Resp, Fn>) {
    return [fn](CallArgs a, Done done) {
      detail::Invoke<Req, Resp>(*fn, a, std::move(done));
    };
  } else if constexpr (detail::kCoroutineWithMetadata<Req, Resp, Fn> ||
                       detail::kCoroutine<Req, Resp, Fn>) {
    // Not a coroutine itself: returns the handler's own awaitable, whose
    // references stay valid until the call completes.
    return [fn](CallArgs a) -> net::awaitable<::grpc::Status> {
      return detail::Invoke<Req, Resp>(*fn, a);
    };
  } else {
    static_assert(kIsSyncHandler<Req, Resp, Fn>,
                  "a protected unary handler is ::grpc::Status(Context, "
                  "const Req&, Resp&), net::awaitable<::grpc::Status>(...) "
                  "or void(..., Done), each optionally taking "
                  "ReplyMetadata& after the response (idem/grpc/handler.h)");
    return [fn](CallArgs a) -> ::grpc::Status {
      return detail::Invoke<Req, Resp>(*fn, a);
    };
  }
}

}  // namespace idem::grpc

#endif  // IDEM_GRPC_HANDLER_H_
