// A protected unary method, as IdempotentMethods (idempotent_methods.h)
// makes it: the object a service's method override forwards to.
//
//   class OrdersService final : public Orders::CallbackService {
//     ::grpc::ServerUnaryReactor* CreateOrder(
//         ::grpc::CallbackServerContext* context,
//         const CreateOrderRequest* request, Order* response) override {
//       return create_order_(context, request, response);
//     }
//     idem::grpc::CallbackMethod<CreateOrderRequest, Order> create_order_;
//   };
//
// and for a synchronous service (Orders::Service):
//
//     ::grpc::Status CreateOrder(::grpc::ServerContext* context,
//                                const CreateOrderRequest* request,
//                                Order* response) override {
//       return create_order_(context, request, response);
//     }
//     idem::grpc::SyncMethod<CreateOrderRequest, Order> create_order_;
//
// What a call gets (SEMANTICS.md, "gRPC"):
//  - the first call with a key runs the handler; its status, status message,
//    details, response (OK only) and allowlisted metadata are stored when
//    the status is among MethodOptions::stored_statuses, and the key is
//    released otherwise;
//  - a retry with the same key and request gets the stored call back, with
//    trailing metadata "idempotent-replayed: true";
//  - idem's own answers (key missing or invalid, key reused with another
//    request, in progress, request too large, store unavailable or full,
//    damaged record, anonymous rejected) carry trailing "idem-problem" and
//    a status message saying what to do (one table: src/problem_status.cc,
//    listed in SEMANTICS.md).
//  - Store-then-send: the result is stored when the handler completes, even
//    when the client's deadline passed or it cancelled meanwhile, so its
//    retry replays instead of running the handler again.
// Streaming methods are not protected (IdempotentMethods refuses them):
// a stream has no single response to store.
//
// Thread-safety: a method object is an immutable handle (copyable, shared
// state); gRPC may call it from many threads at once.

#ifndef IDEM_GRPC_PROTECTED_METHOD_H_
#define IDEM_GRPC_PROTECTED_METHOD_H_

#include <memory>
#include <string>
#include <utility>

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

namespace idem::grpc {

class MethodCore;  // src/method_core.h

// The untyped method both typed handles below wrap.
class ProtectedMethod {
 public:
  ProtectedMethod() = default;
  explicit ProtectedMethod(std::shared_ptr<const MethodCore> core)
      : core_(std::move(core)) {}

  // A default-constructed method answers every call INTERNAL without
  // running anything (never unprotected).

  // Callback API: starts the call and returns the reactor it finishes when
  // the call is answered: on the adapter's executor, or, with a store whose
  // calls never block, on this thread first, often finished before this
  // returns (idempotent_methods.h, "Threads"). The context, request and
  // response are gRPC's, valid until then.
  ::grpc::ServerUnaryReactor* StartCallback(
      ::grpc::CallbackServerContext* context,
      const google::protobuf::Message* request,
      google::protobuf::Message* response) const;

  // Synchronous API: runs the call on this thread (store calls, lock_wait
  // and the handler included) and returns its status. Lock renewal runs on
  // the Guard's renewal thread.
  ::grpc::Status CallSync(::grpc::ServerContext* context,
                          const google::protobuf::Message* request,
                          google::protobuf::Message* response) const;

  // "/package.Service/Method".
  const std::string& full_name() const;
  explicit operator bool() const { return core_ != nullptr; }

 private:
  std::shared_ptr<const MethodCore> core_;
};

// A protected method of the callback API, typed.
template <typename Request, typename Response>
class CallbackMethod {
 public:
  CallbackMethod() = default;
  explicit CallbackMethod(ProtectedMethod method)
      : method_(std::move(method)) {}

  ::grpc::ServerUnaryReactor* operator()(::grpc::CallbackServerContext* context,
                                         const Request* request,
                                         Response* response) const {
    return method_.StartCallback(context, request, response);
  }
  const ProtectedMethod& method() const { return method_; }

 private:
  ProtectedMethod method_;
};

// A protected method of the synchronous API, typed.
template <typename Request, typename Response>
class SyncMethod {
 public:
  SyncMethod() = default;
  explicit SyncMethod(ProtectedMethod method) : method_(std::move(method)) {}

  ::grpc::Status operator()(::grpc::ServerContext* context,
                            const Request* request, Response* response) const {
    return method_.CallSync(context, request, response);
  }
  const ProtectedMethod& method() const { return method_; }

 private:
  ProtectedMethod method_;
};

}  // namespace idem::grpc

#endif  // IDEM_GRPC_PROTECTED_METHOD_H_
