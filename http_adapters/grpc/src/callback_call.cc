// The callback API's protected call. It decides (Guard::Begin), runs the
// handler under the claim (lock renewal while it runs), stores the result
// and only then finishes gRPC's reactor (store-then-send: a client whose
// deadline passed meanwhile gets the replay when it retries).
//
// Where: when the store's calls may block (GuardCalls::store_calls_inline()
// false), the whole call is a coroutine on the adapter's executor, its
// store calls on GuardCalls' pool, so that no gRPC callback thread ever
// waits for the store. When they never block (memory:), the call starts on
// the gRPC thread that delivered it: Begin there, and a decision that needs
// no executor is served there to the end, reactor finished on that thread
// (a replay, idem's own answers, a synchronous handler with its store calls
// inline and lock renewal on the Guard's renewal thread, as Guard::Run).
// Only a lock_wait (a timer) or a coroutine or completion handler continues
// as a coroutine on the executor, from the decision already made. The hop
// saved is a thread switch and gRPC's write path run from a foreign thread.

// Boost 1.74's Asio coroutine headers use std::exchange without including
// <utility>; GCC 12's standard library no longer includes it transitively.
#include <utility>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "answer.h"
#include "call_view.h"
#include "idem/grpc/protected_method.h"
#include "method_core.h"
#include "stored_call.h"

namespace idem::grpc {
namespace {

using google::protobuf::Message;

// The call's status from a final decision (not kWait). The handler's
// exceptions end here (its key released by Execute); anything else thrown
// is the adapter's, answered INTERNAL by the caller.
net::awaitable<::grpc::Status> Proceed(const MethodCore& method, Decision d,
                                       ::grpc::CallbackServerContext& context,
                                       const Message& request, Message& reply) {
  if (d.action == Action::kRespond) {
    co_return AnswerFromGuard(method, d.outcome, d.response, context, reply);
  }
  idem::asio::GuardCalls& calls = *method.adapter->calls;
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

// The whole call on the executor (store calls on the pool when they may
// block).
net::awaitable<::grpc::Status> Serve(const MethodCore& method,
                                     ::grpc::CallbackServerContext& context,
                                     const Message& request, Message& reply) {
  CallView call(context, request, method);
  Decision d =
      co_await method.adapter->calls->Decide(call.view(), method.route);
  co_return co_await Proceed(method, std::move(d), context, request, reply);
}

// A decision made on the gRPC thread, continued on the executor: the
// lock_wait on a timer (store calls inline: Resume never blocks), then the
// rest as Serve.
net::awaitable<::grpc::Status> Continue(const MethodCore& method, Decision d,
                                        ::grpc::CallbackServerContext& context,
                                        const Message& request,
                                        Message& reply) {
  if (d.action == Action::kWait) {
    net::steady_timer timer(co_await net::this_coro::executor);
    while (d.action == Action::kWait) {
      timer.expires_after(
          std::chrono::duration_cast<net::steady_timer::duration>(d.retry_in));
      co_await timer.async_wait(net::use_awaitable);
      d = method.adapter->guard->Resume(std::move(d));
    }
  }
  co_return co_await Proceed(method, std::move(d), context, request, reply);
}

// The last use of gRPC's objects: after Finish they may be gone.
void Complete(const MethodCore& method, ::grpc::ServerUnaryReactor* reactor,
              const ::grpc::Status& status) {
  reactor->Finish(status);
  method.adapter->CallEnded();
}

// `serve` on the executor, the reactor finished whatever it throws: a call
// never hangs.
net::awaitable<void> RunCall(std::shared_ptr<const MethodCore> method,
                             net::awaitable<::grpc::Status> serve,
                             ::grpc::ServerUnaryReactor* reactor) {
  ::grpc::Status status;
  try {
    status = co_await std::move(serve);
  } catch (const std::exception& e) {
    status = AdapterFailed(*method, e.what());
  } catch (...) {
    status =
        AdapterFailed(*method, "an exception that is not a std::exception");
  }
  Complete(*method, reactor, status);
}

// A synchronous handler under a final decision (kExecute or kPassThrough),
// on this thread, as Guard::Run does it: renewal on the Guard's renewal
// thread while it runs, the record completed (store call inline) before
// the status is returned.
::grpc::Status RunSynchronous(const MethodCore& method, Decision& d,
                              ::grpc::CallbackServerContext& context,
                              const Message& request, Message& reply) {
  ReplyMetadata metadata;
  ::grpc::Status status;
  bool failed = false;
  std::string failure;
  try {
    idem::detail::RenewWhileRunning renewing(*method.adapter->guard, d.claim);
    status = method.handler.RunSynchronous(
        CallArgs{&context, &request, &reply, &metadata});
  } catch (const std::exception& e) {
    failed = true;
    failure = e.what();
  } catch (...) {
    failed = true;
    failure = "an exception that is not a std::exception";
  }
  if (failed) {
    if (d.action == Action::kExecute) d.claim.Abandon();
    return HandlerFailed(method, failure);
  }
  if (d.action == Action::kExecute) {
    // Before anything is sent, whatever became of the client meanwhile.
    d.claim.Finish(EncodeCall(status, reply, metadata, method));
  }
  SendMetadata(metadata, context);
  return status;
}

// A store whose calls never block: see the file comment. Returns after the
// reactor is finished, or once the call continues on the executor.
void StartInline(const std::shared_ptr<const MethodCore>& method,
                 ::grpc::CallbackServerContext* context, const Message* request,
                 Message* reply, ::grpc::ServerUnaryReactor* reactor) {
  ::grpc::Status status;
  try {
    std::optional<Decision> d;
    {
      CallView call(*context, *request, *method);
      d = method->adapter->guard->Begin(call.view(), method->route);
    }
    if (d->action == Action::kRespond) {
      status =
          AnswerFromGuard(*method, d->outcome, d->response, *context, *reply);
    } else if (d->action != Action::kWait && method->handler.synchronous()) {
      status = RunSynchronous(*method, *d, *context, *request, *reply);
    } else {
      method->adapter->executor_used.store(true, std::memory_order_relaxed);
      net::co_spawn(
          method->adapter->executor,
          RunCall(method,
                  Continue(*method, std::move(*d), *context, *request, *reply),
                  reactor),
          net::detached);
      return;
    }
  } catch (const std::exception& e) {
    status = AdapterFailed(*method, e.what());
  } catch (...) {
    status =
        AdapterFailed(*method, "an exception that is not a std::exception");
  }
  Complete(*method, reactor, status);
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
  if (core_->adapter->calls->store_calls_inline()) {
    StartInline(core_, context, request, response, reactor);
  } else {
    core_->adapter->executor_used.store(true, std::memory_order_relaxed);
    net::co_spawn(
        core_->adapter->executor,
        RunCall(core_, Serve(*core_, *context, *request, *response), reactor),
        net::detached);
  }
  return reactor;
}

const std::string& ProtectedMethod::full_name() const {
  static const std::string kNone;
  return core_ ? core_->full_name : kNone;
}

}  // namespace idem::grpc
