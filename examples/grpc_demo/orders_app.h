// OrdersApp: idem-grpc-demo's application, the Orders service of
// orders.proto without anything of idem — what a handler of
// idem::grpc runs once per key, and what `--no-idem` serves directly.
//
// CreateOrder makes an order whose id is unique per handler run
// (`<instance>-<random>-<n>`: the instance name, a random tag drawn at
// start, a counter), after waiting `delay_ms` on an Asio timer (no thread is
// held meanwhile), or answers `fail_with` as a gRPC status with the message
// "handler failed". Every CreateOrder call counts one handler run
// (handler_runs), the figure GetStats reports and the tests count.
//
// Thread-safety: every member may be called concurrently from any thread.
// The executor's context must outlive the calls in flight.

#ifndef IDEM_GRPC_DEMO_ORDERS_APP_H_
#define IDEM_GRPC_DEMO_ORDERS_APP_H_

// Boost 1.74's Asio coroutine headers use std::exchange without including
// <utility>; GCC 12's standard library no longer includes it transitively.
#include <utility>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <grpcpp/support/status.h>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "orders.pb.h"

namespace idem::grpc_demo {

namespace v1 = ::idem::demo::v1;

class OrdersApp {
 public:
  // The largest delay_ms CreateOrder waits; more is INVALID_ARGUMENT.
  static constexpr int kMaxDelayMs = 10000;

  // `instance`: the first part of every order id and Order.instance.
  // `timers`: where delay_ms timers run.
  OrdersApp(std::string instance, boost::asio::any_io_executor timers);

  // A CreateOrder run without its wait: counts the run, fills *order (on
  // OK) and says what to answer after how long. INVALID_ARGUMENT (at once)
  // for delay_ms outside 0..kMaxDelayMs or fail_with outside 0..16.
  struct Outcome {
    ::grpc::Status status;
    std::chrono::milliseconds delay{0};
  };
  Outcome Run(const v1::CreateOrderRequest& request, v1::Order* order);

  // CreateOrder as a completion: Run, then done(status) once, from this
  // thread (no delay) or the timers' executor (after delay_ms).
  void CreateOrder(const v1::CreateOrderRequest& request, v1::Order* order,
                   std::function<void(::grpc::Status)> done);

  // CreateOrder as a coroutine on the caller's executor: Run, then a timer
  // of delay_ms (none for 0: it completes without suspending).
  boost::asio::awaitable<::grpc::Status> CreateOrderAsync(
      const v1::CreateOrderRequest& request, v1::Order* order);

  // handler_runs: CreateOrder calls since start.
  void GetStats(v1::Stats* stats) const;

  std::int64_t handler_runs() const {
    return handler_runs_.load(std::memory_order_relaxed);
  }
  const std::string& instance() const { return instance_; }

 private:
  const std::string instance_;
  // Random per process, so that two runs of one instance name never make
  // the same order id.
  const std::string tag_;
  boost::asio::any_io_executor timers_;
  std::atomic<std::int64_t> handler_runs_{0};
  std::atomic<std::uint64_t> next_order_{1};
};

}  // namespace idem::grpc_demo

#endif  // IDEM_GRPC_DEMO_ORDERS_APP_H_
