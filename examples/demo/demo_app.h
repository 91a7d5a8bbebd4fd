// DemoApp: the endpoints of idem-demo (SEMANTICS.md, "The demo server"), as
// one coroutine request handler that knows nothing about idempotency.
//
//   POST /orders        create an order (idem protects it, not this code);
//                       query: delay_ms=N, status=NNN, fail=throw
//   POST /payments      the same handler: a second operation for
//                       per-operation keys; its ids are order ids
//   GET  /orders/<id>   the order (or payment), or 404
//   GET  /stats         {"handler_runs":N}
//   GET  /metrics       Prometheus text from the metrics source
//
// Thread-safety: Handle may run concurrently on any number of threads.

#ifndef IDEM_DEMO_DEMO_APP_H_
#define IDEM_DEMO_DEMO_APP_H_

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include <boost/asio/awaitable.hpp>

#include "idem/beast/handler.h"

namespace idem::demo {

class DemoApp {
 public:
  // Orders kept for GET /orders/<id>; older ones are forgotten, so a long
  // benchmark cannot grow the process without bound.
  static constexpr std::size_t kMaxOrders = 200'000;
  // Longest delay_ms honoured.
  static constexpr std::uint64_t kMaxDelayMs = 600'000;

  // `metrics` renders GET /metrics (empty when null).
  DemoApp(std::string instance, std::function<std::string()> metrics);

  boost::asio::awaitable<beast::Response> Handle(beast::Request request);

  // Times POST /orders or /payments was started in this process.
  std::uint64_t handler_runs() const {
    return handler_runs_.load(std::memory_order_relaxed);
  }
  const std::string& instance() const { return instance_; }
  // For handlers outside this class (POST /transfers, transfers.h).
  void CountHandlerRun() {
    handler_runs_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  boost::asio::awaitable<beast::Response> CreateOrder(beast::Request request);
  beast::Response GetOrder(const beast::Request& request, std::string_view id);
  std::string NewOrderId();

  const std::string instance_;
  // The instance name reduced to characters safe in a URL path.
  const std::string id_prefix_;
  const std::function<std::string()> metrics_;
  // Random per process: with the counter, ids are unique across instances
  // and restarts even when two instances share a name.
  const std::uint64_t nonce_;
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::uint64_t> handler_runs_{0};

  std::mutex mu_;
  std::unordered_map<std::string, std::string> orders_;  // Under mu_.
  std::deque<std::string> order_ids_;                    // Under mu_: FIFO.
};

}  // namespace idem::demo

#endif  // IDEM_DEMO_DEMO_APP_H_
