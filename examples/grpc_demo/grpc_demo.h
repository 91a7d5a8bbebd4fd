// GrpcDemo: idem-grpc-demo assembled from its parts — a store, a Guard,
// the Orders service (OrdersApp) with CreateOrder protected by idem::grpc,
// and a gRPC server. main.cc only turns flags into GrpcDemoOptions.
//
// CreateOrder requires an idempotency-key; `authorization: Bearer X` makes
// X the key's scope, a call without it is anonymous (one shared scope).
// GetStats is not protected. With idem = false the same service runs
// without idem (the benchmark baseline).
//
// Thread-safety: Start, Shutdown and Wait from one thread; the service's
// calls run on gRPC's threads and the demo's timer threads.

#ifndef IDEM_GRPC_DEMO_GRPC_DEMO_H_
#define IDEM_GRPC_DEMO_GRPC_DEMO_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <grpcpp/server.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "idem/log.h"
#include "orders_app.h"

namespace idem::grpc_demo {

struct GrpcDemoOptions {
  std::string host = "127.0.0.1";
  // 0: the system picks one; port() says which.
  std::uint16_t port = 50051;
  // The store to open (OpenStore). Default: kDefaultStoreUri.
  std::string store_uri;
  std::chrono::seconds ttl{24 * 3600};
  Duration lock_timeout = std::chrono::seconds(60);
  // GuardOptions::lock_renewal; zero: off.
  Duration lock_renewal = Duration::zero();
  std::chrono::milliseconds lock_wait{0};
  // Threads of the demo's own io_context, where idem::grpc runs the
  // protected calls (their coroutines, lock_wait and renewal timers, the
  // handler) and the handlers' delay_ms timers; gRPC polls on threads of
  // its own. Default: 2.
  int threads = 2;
  // The first part of every order id, and Order.instance.
  std::string instance = "grpc-demo";
  // false: the same service without idem (the benchmark baseline).
  bool idem = true;
  // Where warnings and errors of the Guard and the store go. Default:
  // stderr, warnings and above.
  LogSink log;
};

// RocksDB in ./var/idem-grpc, relative to the working directory: durable,
// so that a restarted demo still replays what it answered; beside
// idem-demo's ./var/idem, so both run in one directory.
inline constexpr std::string_view kDefaultStoreUri = "rocksdb:./var/idem-grpc";

class GrpcDemo {
 public:
  // Opens options.store_uri (unless idem is false). Errors name the store
  // URI with its password redacted.
  static Result<std::unique_ptr<GrpcDemo>> Create(GrpcDemoOptions options);
  ~GrpcDemo();

  // Binds and starts serving; kUnavailable naming the address when it
  // cannot be bound.
  Status Start();
  std::uint16_t port() const { return port_; }
  const std::string& host() const { return options_.host; }
  // Stops taking calls and ends those in flight (a call still in its
  // handler is cancelled after a grace period); then Wait returns.
  void Shutdown();
  void Wait();

  OrdersApp& app() { return *app_; }
  // Null with idem = false.
  Guard* guard() { return guard_.get(); }

 private:
  explicit GrpcDemo(GrpcDemoOptions options);

  GrpcDemoOptions options_;
  boost::asio::io_context timers_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type>
      work_;
  std::vector<std::thread> threads_;
  std::shared_ptr<Guard> guard_;
  std::unique_ptr<OrdersApp> app_;
  // The service: with or without idem (grpc_demo.cc).
  std::unique_ptr<::grpc::Service> service_;
  std::unique_ptr<::grpc::Server> server_;
  std::uint16_t port_ = 0;
};

}  // namespace idem::grpc_demo

#endif  // IDEM_GRPC_DEMO_GRPC_DEMO_H_
