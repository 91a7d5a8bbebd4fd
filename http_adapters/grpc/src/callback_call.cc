// The callback API's protected call. It decides (Guard::Begin), runs the
// handler under the claim (lock renewal while it runs), stores the result
// and only then finishes gRPC's reactor (store-then-send: a client whose
// deadline passed meanwhile gets the replay when it retries).
//
// Where: when the store's calls may block (GuardCalls::store_calls_inline()
// false), the decision begins on the gRPC thread without blocking (key,
// fingerprint, a local cache's hit: StartOnGrpcThread), and an answer
// that needs no store call is finished there; the rest of the call is a
// coroutine on the adapter's executor, its store calls on GuardCalls'
// pool, so that no gRPC callback thread ever waits for the store. When they
// never block (memory:), the call starts on the gRPC thread that delivered it:
// Begin there, and a decision that needs no executor is served there to the
// end, reactor finished on that thread (a replay, idem's own answers, a
// synchronous handler with its store calls inline and lock renewal on the
// Guard's renewal thread, as Guard::Run). A coroutine or completion handler,
// and a lock_wait, run as one coroutine started in place on that thread
// (LaunchHere): a handler that completes without suspending is stored and
// finished there too; whatever suspends (the handler's own waits, the lock_wait
// timer) resumes on the executor, and the call ends there. The hop saved is a
// thread switch, a post, and gRPC's write path run from a foreign thread.

// Boost 1.74's Asio coroutine headers use std::exchange without including
// <utility>; GCC 12's standard library no longer includes it transitively.
#include <utility>

#include <exception>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/version.hpp>

#include "answer.h"
#include "call_view.h"
#include "idem/grpc/protected_method.h"
#include "method_core.h"
#include "stored_call.h"

namespace idem::grpc {
namespace {

using google::protobuf::Message;

// An exception's text, for the log.
std::string What(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// The last use of gRPC's objects: after Finish they may be gone.
void Complete(const MethodCore& method, ::grpc::ServerUnaryReactor* reactor,
              const ::grpc::Status& status) {
  reactor->Finish(status);
  method.adapter->CallEnded();
}

// Everything after a final decision (not kWait), to the reactor's Finish:
// the Guard's answer, or the handler, its result stored (before anything
// is sent, whatever became of the client meanwhile) and its metadata
// added. One frame: with a store that never blocks and a handler that
// never suspends, the adapter allocates no other (GuardCalls::Execute's
// aside). The handler's exceptions end here (its key released by
// Execute), answered UNKNOWN; anything else thrown is the adapter's,
// answered INTERNAL: a call never hangs.
net::awaitable<void> Proceed(std::shared_ptr<const MethodCore> method,
                             Decision d, ::grpc::CallbackServerContext* context,
                             const Message* request, Message* reply,
                             ::grpc::ServerUnaryReactor* reactor) {
  const MethodCore& m = *method;
  idem::asio::GuardCalls& calls = *m.adapter->calls;
  ::grpc::Status status;
  std::exception_ptr adapter_error;
  try {
    if (d.action == Action::kRespond) {
      status = AnswerFromGuard(m, d.outcome, d.response, *context, *reply);
    } else {
      ReplyMetadata metadata;
      CallArgs args{context, request, reply, &metadata};
      std::exception_ptr handler_error;
      try {
        if (d.action == Action::kExecute) {
          status = co_await calls.Execute(d, m.handler(args));
        } else {  // kPassThrough: unprotected, nothing to store.
          status = co_await m.handler(args);
        }
      } catch (...) {
        handler_error = std::current_exception();
      }
      if (handler_error) {
        status = HandlerFailed(m, What(handler_error));
      } else {
        if (d.action == Action::kExecute) {
          const Response stored = EncodeCall(status, *reply, metadata, m);
          if (calls.store_calls_inline()) {
            d.claim.Finish(stored);  // Never blocks: no frame, no hop.
          } else {
            co_await calls.Finish(d.claim, stored);
          }
        }
        SendMetadata(metadata, *context);
      }
    }
  } catch (...) {
    adapter_error = std::current_exception();
  }
  if (adapter_error) status = AdapterFailed(m, What(adapter_error));
  Complete(m, reactor, status);
}

// The whole call on the executor (store calls on the pool when they may
// block).
net::awaitable<void> Serve(std::shared_ptr<const MethodCore> method,
                           ::grpc::CallbackServerContext* context,
                           const Message* request, Message* reply,
                           ::grpc::ServerUnaryReactor* reactor) {
  std::optional<Decision> d;
  std::exception_ptr error;
  try {
    CallView call(*context, *request, *method);
    d = co_await method->adapter->calls->Decide(call.view(), method->route);
  } catch (...) {
    error = std::current_exception();
  }
  if (error) {
    Complete(*method, reactor, AdapterFailed(*method, What(error)));
    co_return;
  }
  co_await Proceed(std::move(method), std::move(*d), context, request, reply,
                   reactor);
}

// A decision begun on the gRPC thread that needs the store (kCallStore) or
// a wait (kWait): continued (the claim on the pool, the wait on a timer,
// GuardCalls::Continue), then Proceed.
net::awaitable<void> ServeBegun(std::shared_ptr<const MethodCore> method,
                                Decision d,
                                ::grpc::CallbackServerContext* context,
                                const Message* request, Message* reply,
                                ::grpc::ServerUnaryReactor* reactor) {
  std::exception_ptr error;
  try {
    Decision continued =
        co_await method->adapter->calls->Continue(std::move(d));
    d = std::move(continued);
  } catch (...) {
    error = std::current_exception();
  }
  if (error) {
    Complete(*method, reactor, AdapterFailed(*method, What(error)));
    co_return;
  }
  co_await Proceed(std::move(method), std::move(d), context, request, reply,
                   reactor);
}

// Runs `call` on this thread until it first suspends, then on `executor`
// (where what it awaits completes): co_spawn minus its first step, a post
// to the executor, i.e. minus a thread switch for a call whose handler
// never suspends. Asio has no public way to start a coroutine in place;
// the awaitable_thread that co_spawn itself launches does it, with this
// constructor, in Boost 1.74 to 1.76. Other versions take co_spawn's hop.
void LaunchHere(const net::any_io_executor& executor,
                net::awaitable<void> call) {
#if BOOST_VERSION >= 107400 && BOOST_VERSION < 107700
  net::detail::awaitable_thread<net::any_io_executor>(std::move(call), executor)
      .launch();
#else
  net::co_spawn(executor, std::move(call), net::detached);
#endif
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

// The decision begun on the gRPC thread that delivered the call, without
// blocking (Guard::BeginWithoutBlocking: the key, the fingerprint, and the
// claim when the store never blocks or answers it at once, e.g. a local
// cache's hit); see the file comment. Returns after the reactor is
// finished, or once the call continues elsewhere.
void StartOnGrpcThread(const std::shared_ptr<const MethodCore>& method,
                       ::grpc::CallbackServerContext* context,
                       const Message* request, Message* reply,
                       ::grpc::ServerUnaryReactor* reactor) {
  const bool calls_inline = method->adapter->calls->store_calls_inline();
  ::grpc::Status status;
  std::optional<Decision> d;
  try {
    {
      CallView call(*context, *request, *method);
      d = method->adapter->guard->BeginWithoutBlocking(call.view(),
                                                       method->route);
    }
    if (d->action == Action::kRespond) {
      status =
          AnswerFromGuard(*method, d->outcome, d->response, *context, *reply);
      d.reset();
    } else if (calls_inline && d->action != Action::kWait &&
               method->handler.synchronous()) {
      status = RunSynchronous(*method, *d, *context, *request, *reply);
      d.reset();
    }
  } catch (const std::exception& e) {
    d.reset();
    status = AdapterFailed(*method, e.what());
  } catch (...) {
    d.reset();
    status =
        AdapterFailed(*method, "an exception that is not a std::exception");
  }
  if (!d) {
    Complete(*method, reactor, status);
    return;
  }
  method->adapter->executor_used.store(true, std::memory_order_relaxed);
  // A final decision goes straight to Proceed (one frame); a wait, or a
  // claim for the pool, through ServeBegun.
  const bool final_decision =
      d->action != Action::kWait && d->action != Action::kCallStore;
  net::awaitable<void> call =
      final_decision
          ? Proceed(method, std::move(*d), context, request, reply, reactor)
          : ServeBegun(method, std::move(*d), context, request, reply, reactor);
  if (calls_inline) {
    // Starts here, and finishes here too unless it suspends.
    LaunchHere(method->adapter->executor, std::move(call));
  } else {
    // The store may block: the rest runs on the executor.
    net::co_spawn(method->adapter->executor, std::move(call), net::detached);
  }
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
  if (core_->adapter->calls->begins_without_blocking()) {
    StartOnGrpcThread(core_, context, request, response, reactor);
  } else {
    core_->adapter->executor_used.store(true, std::memory_order_relaxed);
    net::co_spawn(core_->adapter->executor,
                  Serve(core_, context, request, response, reactor),
                  net::detached);
  }
  return reactor;
}

const std::string& ProtectedMethod::full_name() const {
  static const std::string kNone;
  return core_ ? core_->full_name : kNone;
}

}  // namespace idem::grpc
