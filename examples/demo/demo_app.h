// DemoApp: the endpoints of idem-demo (SEMANTICS.md, "The demo server"), as
// one coroutine request handler that knows nothing about idempotency.
//
//   POST /orders        create an order (idem protects it, not this code);
//                       query: delay_ms=N, status=NNN, fail=throw
//   POST /payments      the same handler: a second operation for
//                       per-operation keys; its ids are order ids
//   GET  /orders/<id>   the order (or payment), or 404
//   GET  /stats         {"handler_runs":N,"protection":"on"|"off"}
//                       (no "protection" without idem)
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
  // Orders kept for GET /orders/<id>, oldest forgotten first, so that a
  // long benchmark or a stream of large bodies cannot grow the process
  // without bound: at most kMaxOrders of them and at most max_order_bytes
  // of their bodies (each order counts its id, its body, which holds the
  // request body, and kOrderOverhead). An order larger than the whole
  // budget is answered but not kept (GET then answers 404), as is every
  // order with max_order_bytes 0. Default: kDefaultMaxOrderBytes (16 MiB).
  static constexpr std::size_t kMaxOrders = 200'000;
  static constexpr std::size_t kDefaultMaxOrderBytes = std::size_t{16} << 20;
  static constexpr std::size_t kOrderOverhead = 128;
  // --max-order-bytes's maximum: 64 GiB.
  static constexpr std::size_t kMaxOrderBytesLimit = std::size_t{64} << 30;
  // Longest delay_ms honoured.
  static constexpr std::uint64_t kMaxDelayMs = 600'000;

  // `metrics` renders GET /metrics (empty when null); `protection` says
  // whether idem's switch is on, for GET /stats (omitted when null).
  DemoApp(std::string instance, std::function<std::string()> metrics,
          std::size_t max_order_bytes = kDefaultMaxOrderBytes,
          std::function<bool()> protection = nullptr);

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
  // Keeps `body` for GET /orders/<id> within the bounds above.
  void KeepOrder(const std::string& id, const std::string& body);

  const std::string instance_;
  // The instance name reduced to characters safe in a URL path.
  const std::string id_prefix_;
  const std::function<std::string()> metrics_;
  const std::function<bool()> protection_;
  // Random per process: with the counter, ids are unique across instances
  // and restarts even when two instances share a name.
  const std::uint64_t nonce_;
  const std::size_t max_order_bytes_;
  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::uint64_t> handler_runs_{0};

  std::mutex mu_;
  std::unordered_map<std::string, std::string> orders_;  // Under mu_.
  std::deque<std::string> order_ids_;                    // Under mu_: FIFO.
  std::size_t order_bytes_ = 0;  // Under mu_: what orders_ counts.
};

}  // namespace idem::demo

#endif  // IDEM_DEMO_DEMO_APP_H_
