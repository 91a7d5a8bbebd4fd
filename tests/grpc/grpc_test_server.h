// A real gRPC server on 127.0.0.1 (port 0) serving tests/grpc's Orders
// service with CreateOrder protected by idem::grpc (callback or synchronous
// API), and a real client. CreateOrder's handler counts its runs, answers
// the request's fail_with status (message "handler failed", binary details),
// sets metadata (initial x-order-version, trailing x-trace and x-secret),
// throws for item "throw", and waits at the Gate while the test holds it.

#ifndef IDEM_TESTS_GRPC_GRPC_TEST_SERVER_H_
#define IDEM_TESTS_GRPC_GRPC_TEST_SERVER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <boost/asio/any_io_executor.hpp>

#include "idem/clock.h"
#include "idem/grpc/idempotent_methods.h"
#include "idem/guard.h"
#include "idem/log.h"
#include "idem/store.h"
#include "test_service.grpc.pb.h"

namespace idem::grpc_test {

namespace net = boost::asio;

using idem::test::v1::CreateOrderRequest;
using idem::test::v1::Order;

inline constexpr char kCreateOrder[] = "/idem.test.v1.Orders/CreateOrder";
// Details the handler attaches to a failed status: binary, with a NUL.
inline const std::string kDetails = std::string("det\0ails\xff", 9);

// Where handlers wait while a test holds them: callback-API handlers park
// their Done (no thread held), sync-API handlers block their gRPC thread.
class Gate {
 public:
  void Close();
  // Completes every parked call and lets blocked ones return.
  void Open();
  // Whether `n` calls are waiting here, within a generous bound.
  bool WaitHeld(int n);

  // Called by the handlers.
  bool closed();
  void Park(idem::grpc::Done done, ::grpc::Status status);
  void Block();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
  int held_ = 0;
  std::vector<std::pair<idem::grpc::Done, ::grpc::Status>> parked_;
};

// A thread-safe log capture.
class LogLines {
 public:
  LogSink Sink();
  std::vector<std::string> lines();

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// The callback API's handler form (idem/grpc/handler.h). The coroutine and
// synchronous forms ignore the Gate.
// kCoroutine suspends on a timer before it answers; kReadyCoroutine answers
// without suspending.
enum class Form { kCompletion, kCoroutine, kReadyCoroutine, kSync };

struct ServerSetup {
  bool sync_api = false;
  Form form = Form::kCompletion;
  // Default: a memory store.
  std::shared_ptr<Store> store;
  // Default: a ManualClock.
  std::shared_ptr<Clock> clock;
  GuardOptions guard_options;
  idem::grpc::MethodOptions method;
  idem::grpc::ScopeResolver scope = idem::grpc::SharedScope();
  // Default: none (the capture, when set, also gets the adapter's lines).
  LogSink log;
  idem::asio::GuardCallOptions calls;
  // Default: the adapter's own pool.
  std::optional<net::any_io_executor> executor;
};

struct Reply {
  ::grpc::Status status;
  Order order;
  std::multimap<std::string, std::string> initial;
  std::multimap<std::string, std::string> trailing;

  // The one value of `key` in the trailing metadata, or "" (absent), or
  // "<n values>".
  std::string Trailing(const std::string& key) const;
  std::string Initial(const std::string& key) const;
};

struct CallOptions {
  // Each is sent as one "idempotency-key" entry.
  std::vector<std::string> keys;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::optional<std::chrono::milliseconds> deadline;
  // Called with the context once the call has started (e.g. TryCancel).
  std::function<void(::grpc::ClientContext&)> started;
};

class TestServer {
 public:
  // Starts the server; check ok() (and error()) before use.
  explicit TestServer(ServerSetup setup);
  ~TestServer();

  bool ok() const { return server_ != nullptr; }
  const std::string& error() const { return error_; }

  Reply Call(const CreateOrderRequest& request, const CallOptions& options);
  Reply Call(const CreateOrderRequest& request, const std::string& key) {
    return Call(request, CallOptions{.keys = {key}});
  }
  // `n` calls at once from this thread (the async client API), each with
  // `options`; the replies in completion order.
  std::vector<Reply> Burst(const CreateOrderRequest& request,
                           const CallOptions& options, int n);

  int runs() const { return runs_.load(); }
  Gate& gate() { return gate_; }
  Guard& guard() { return *guard_; }
  const std::shared_ptr<Guard>& shared_guard() const { return guard_; }
  idem::grpc::IdempotentMethods& methods() { return *methods_; }
  std::shared_ptr<ManualClock> manual_clock() const { return manual_clock_; }
  std::shared_ptr<Store> store() const { return store_; }
  const std::string& address() const { return address_; }
  std::shared_ptr<::grpc::Channel> channel() const { return channel_; }
  // The threads gRPC called CreateOrder on (callback API).
  std::set<std::thread::id> grpc_threads();
  // The threads the handler ran on.
  std::set<std::thread::id> handler_threads();
  // Whether this thread is inside the callback API's CreateOrder, i.e. in
  // the call gRPC made to start a call, at this moment.
  static bool InCreateOrder();
  // Handler runs made inside that call (InCreateOrder), on its thread.
  int runs_in_create_order() const { return runs_in_create_order_.load(); }

 private:
  class CallbackService;
  class SyncService;

  // CreateOrder's work, shared by both APIs: the order and metadata of run
  // n, the status the request asks for.
  ::grpc::Status Handle(const CreateOrderRequest& request, Order& order,
                        idem::grpc::ReplyMetadata& metadata);

  static net::awaitable<::grpc::Status> HandleLater(
      TestServer* server, const CreateOrderRequest& request, Order& order,
      idem::grpc::ReplyMetadata& metadata);
  // The coroutine form answering at once (no suspension).
  static net::awaitable<::grpc::Status> HandleNow(
      TestServer* server, const CreateOrderRequest& request, Order& order,
      idem::grpc::ReplyMetadata& metadata);

  std::atomic<int> runs_{0};
  std::atomic<int> runs_in_create_order_{0};
  std::mutex threads_mu_;
  std::set<std::thread::id> grpc_threads_;
  std::set<std::thread::id> handler_threads_;
  Gate gate_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<ManualClock> manual_clock_;
  std::shared_ptr<Guard> guard_;
  std::unique_ptr<idem::grpc::IdempotentMethods> methods_;
  std::unique_ptr<::grpc::Service> service_;
  std::unique_ptr<::grpc::Server> server_;
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<idem::test::v1::Orders::Stub> stub_;
  std::string address_;
  std::string error_;
};

}  // namespace idem::grpc_test

#endif  // IDEM_TESTS_GRPC_GRPC_TEST_SERVER_H_
