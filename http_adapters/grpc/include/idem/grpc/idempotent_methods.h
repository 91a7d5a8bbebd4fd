// IdempotentMethods: the gRPC adapter. It makes a service's unary methods
// idempotent with the `idempotency-key` request metadata, over a Guard (any
// store), for gRPC's callback API and its synchronous API:
//
//   auto methods = idem::grpc::IdempotentMethods::Create({
//       .guard = guard,
//       .scope = [](const ::grpc::ServerContextBase& context)
//           -> std::optional<std::string> { ...the caller's identity... },
//   });
//   auto create = (*methods)->ProtectCallback<CreateOrderRequest, Order>(
//       "/idem.demo.v1.Orders/CreateOrder",
//       [](::grpc::ServerContextBase& context, const CreateOrderRequest& req,
//          Order& order) -> net::awaitable<::grpc::Status> { ... });
//   // then forward the service's override to *create
//   // (protected_method.h).
//
// What each call gets is in protected_method.h and SEMANTICS.md ("gRPC");
// the handler forms in handler.h; per-method settings in method_options.h.
//
// Scope: who a key belongs to. Create refuses to start without a choice
// (kInvalidArgument naming `scope`), as the HTTP adapters do: a resolver
// over the call's ServerContextBase (a verified `authorization` metadata
// value's subject, or auth_context()'s peer identity with mTLS), or
// idem::asio::SharedScope() when every caller may share one key namespace
// (idem/asio/shared_scope.h says when that is safe). The resolver runs
// where the call is decided (see Threads: a gRPC thread or the adapter's
// executor) and must not block; an exception from it fails the call
// INTERNAL without running the handler.
//
// Threads: with the callback API, no protected call ever blocks a gRPC
// callback thread. When the store's calls may block
// (StoreInfo::calls_may_block; GuardCalls, idem/asio/guard_calls.h), each
// call runs as a coroutine on the adapter's executor (given, or a pool it
// owns), its store calls on idem::asio's store-call pool. When they never
// block (memory), the call is decided on the gRPC thread that started it,
// and a replay, idem's own answers and a synchronous handler (store calls
// inline, lock renewal on the Guard's renewal thread) end there, the
// reactor finished on that thread: no thread switch. A coroutine or
// completion handler (lock renewal a timer on the executor) is started on
// that thread too, and a call whose handler completes without suspending
// ends there; once the handler suspends (or a lock_wait waits on its
// timer), the call continues and ends on the executor. With the synchronous API
// the call runs on the gRPC thread that serves it (as any sync method does):
// store calls inline, lock_wait sleeping on the Guard's clock, lock renewal on
// the Guard's renewal thread.
//
// Metrics and logs are the Guard's (idem/metrics.h, GuardSetup::log); the
// adapter logs through IdempotentMethodsOptions::calls.log only what the
// Guard cannot see (a handler that threw, a stored call that does not
// decode), and never a key.
//
// Thread-safety: every member may be called from any thread. Shutdown
// order: the gRPC server first (Server::Shutdown waits for the calls in
// flight, each of which finishes its reactor only after its store calls),
// then the IdempotentMethods (its destructor waits for the coroutines and
// store calls still running), then the Guard.

#ifndef IDEM_GRPC_IDEMPOTENT_METHODS_H_
#define IDEM_GRPC_IDEMPOTENT_METHODS_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <grpcpp/server_context.h>
#include <boost/asio/any_io_executor.hpp>

#include "idem/asio/guard_calls.h"
#include "idem/asio/shared_scope.h"
#include "idem/error.h"
#include "idem/grpc/handler.h"
#include "idem/grpc/method_options.h"
#include "idem/grpc/protected_method.h"
#include "idem/guard.h"

namespace idem::grpc {

class AdapterState;  // src/adapter_state.h

using ScopeResolver = idem::asio::ScopeResolver<::grpc::ServerContextBase>;
using idem::asio::SharedScope;

struct IdempotentMethodsOptions {
  // Required.
  std::shared_ptr<Guard> guard;
  // Required: a resolver or SharedScope() (see above).
  ScopeResolver scope;
  // Where the callback API's protected calls run: their coroutines, the
  // lock_wait and renewal timers, and the coroutine and completion
  // handlers (all of each call when the store's calls may block; see
  // Threads). Unset: a pool of
  // `threads` threads the adapter owns. A given executor's context must
  // outlive the IdempotentMethods and keep running until its destructor
  // returns. Default: unset.
  std::optional<net::any_io_executor> executor;
  // Threads of the adapter's own pool (when `executor` is unset); must be
  // positive. Default: 2.
  std::size_t threads = 2;
  // The store-call pool and its queue timeout, and where the adapter's own
  // errors are logged (idem/asio/guard_calls.h). The synchronous API calls
  // the store inline on its own threads and ignores them.
  idem::asio::GuardCallOptions calls;
};

class IdempotentMethods {
 public:
  // kInvalidArgument when the guard is missing, `scope` is unset (the
  // message names `scope`), `threads` is 0, or `calls` is invalid.
  static Result<std::unique_ptr<IdempotentMethods>> Create(
      IdempotentMethodsOptions options);

  IdempotentMethods(const IdempotentMethods&) = delete;
  IdempotentMethods& operator=(const IdempotentMethods&) = delete;
  // Waits for the protected calls and store calls still running (see the
  // shutdown order above), then, when calls ran on the executor, for a
  // round trip through it: their threads' last work is then ordered before
  // what follows for ThreadSanitizer too, which cannot see gRPC's own
  // locks.
  ~IdempotentMethods();

  // The unary method `full_name` ("/package.Service/Method") of the
  // callback API, protected, running `handler` (any form of handler.h).
  // kInvalidArgument naming what is wrong when the method is not in the
  // generated descriptor pool, is streaming, does not take Req and return
  // Resp, or `options` is invalid (a GuardOptions field, a metadata key
  // that is not lowercase).
  template <typename Req, typename Resp, typename Handler>
  Result<CallbackMethod<Req, Resp>> ProtectCallback(
      std::string_view full_name, Handler handler, MethodOptions options = {}) {
    IDEM_ASSIGN_OR_RETURN(
        ProtectedMethod method,
        Protect(full_name, Req::descriptor(), Resp::descriptor(),
                MakeAnyHandler<Req, Resp>(std::move(handler)),
                std::move(options)));
    return CallbackMethod<Req, Resp>(std::move(method));
  }

  // The same for the synchronous API; `handler` is form 1 of handler.h
  // (::grpc::Status(Context, const Req&, Resp&[, ReplyMetadata&])).
  template <typename Req, typename Resp, typename Handler>
  Result<SyncMethod<Req, Resp>> ProtectSync(std::string_view full_name,
                                            Handler handler,
                                            MethodOptions options = {}) {
    static_assert(kIsSyncHandler<Req, Resp, Handler>,
                  "a synchronous-API method takes a synchronous handler: "
                  "::grpc::Status(::grpc::ServerContextBase&, const Req&, "
                  "Resp&[, ReplyMetadata&])");
    IDEM_ASSIGN_OR_RETURN(
        ProtectedMethod method,
        Protect(full_name, Req::descriptor(), Resp::descriptor(),
                MakeAnyHandler<Req, Resp>(std::move(handler)),
                std::move(options)));
    return SyncMethod<Req, Resp>(std::move(method));
  }

  Guard& guard();
  // Whether the callback API's store calls run on the store-call pool.
  bool store_calls_on_pool() const;

  // What the templates above share: the method checked against its
  // descriptor and its options made into route options.
  Result<ProtectedMethod> Protect(std::string_view full_name,
                                  const google::protobuf::Descriptor* request,
                                  const google::protobuf::Descriptor* response,
                                  AnyHandler handler, MethodOptions options);

 private:
  explicit IdempotentMethods(std::shared_ptr<AdapterState> state);

  // Shared with every method made here.
  std::shared_ptr<AdapterState> state_;
};

}  // namespace idem::grpc

#endif  // IDEM_GRPC_IDEMPOTENT_METHODS_H_
