// The callback API's protected call: a coroutine on the adapter's executor
// that decides (GuardCalls: store calls on the pool when they may block,
// lock_wait on a timer), runs the handler under the claim (lock renewal on
// a timer), stores the result and only then finishes gRPC's reactor
// (store-then-send: a client whose deadline passed meanwhile gets the
// replay when it retries).

// Boost 1.74's Asio coroutine headers use std::exchange without including
// <utility>; GCC 12's standard library no longer includes it transitively.
#include <utility>

#include <exception>
#include <memory>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "answer.h"
#include "call_view.h"
#include "idem/grpc/protected_method.h"
#include "method_core.h"
#include "stored_call.h"

namespace idem::grpc {
namespace {

using google::protobuf::Message;

// The call's status. The handler's exceptions end here (its key released
// by Execute); anything else thrown is the adapter's, answered INTERNAL by
// the caller.
net::awaitable<::grpc::Status> Serve(const MethodCore& method,
                                     ::grpc::CallbackServerContext& context,
                                     const Message& request, Message& reply) {
  idem::asio::GuardCalls& calls = *method.adapter->calls;
  CallView call(context, request, method);
  Decision d = co_await calls.Decide(call.view(), method.route);
  if (d.action == Action::kRespond) {
    co_return AnswerFromGuard(method, d.outcome, d.response, context, reply);
  }
  ReplyMetadata metadata;
  CallArgs args{&context, &request, &reply, &metadata};
  ::grpc::Status status;
  bool failed = false;
  std::string failure;
  try {
    if (d.action == Action::kExecute) {
      status = co_await calls.Execute(d, method.handler(args));
    } else {  // kPassThrough: unprotected, nothing to store.
      status = co_await method.handler(args);
    }
  } catch (const std::exception& e) {
    failed = true;
    failure = e.what();
  } catch (...) {
    failed = true;
    failure = "an exception that is not a std::exception";
  }
  if (failed) co_return HandlerFailed(method, failure);
  if (d.action == Action::kExecute) {
    // Before anything is sent, whatever became of the client meanwhile.
    co_await calls.Finish(d.claim, EncodeCall(status, reply, metadata, method));
  }
  SendMetadata(metadata, context);
  co_return status;
}

net::awaitable<void> RunCall(std::shared_ptr<const MethodCore> method,
                             ::grpc::CallbackServerContext* context,
                             const Message* request, Message* reply,
                             ::grpc::ServerUnaryReactor* reactor) {
  ::grpc::Status status;
  try {
    status = co_await Serve(*method, *context, *request, *reply);
  } catch (const std::exception& e) {
    status = AdapterFailed(*method, e.what());
  } catch (...) {
    // Whatever it was, the reactor is finished: a call never hangs.
    status =
        AdapterFailed(*method, "an exception that is not a std::exception");
  }
  // The last use of gRPC's objects: after Finish they may be gone.
  reactor->Finish(status);
  method->adapter->CallEnded();
}

}  // namespace

::grpc::ServerUnaryReactor* ProtectedMethod::StartCallback(
    ::grpc::CallbackServerContext* context, const Message* request,
    Message* response) const {
  ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!core_) {
    reactor->Finish(NotSetUp());
    return reactor;
  }
  core_->adapter->CallStarted();
  net::co_spawn(core_->adapter->executor,
                RunCall(core_, context, request, response, reactor),
                net::detached);
  return reactor;
}

const std::string& ProtectedMethod::full_name() const {
  static const std::string kNone;
  return core_ ? core_->full_name : kNone;
}

}  // namespace idem::grpc
