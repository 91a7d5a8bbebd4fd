#include "orders_app.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <utility>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace idem::grpc_demo {
namespace {

std::string RandomTag() {
  std::random_device device;
  std::uniform_int_distribution<std::uint32_t> draw;
  char text[9];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(draw(device)));
  return text;
}

}  // namespace

OrdersApp::OrdersApp(std::string instance, boost::asio::any_io_executor timers)
    : instance_(std::move(instance)),
      tag_(RandomTag()),
      timers_(std::move(timers)) {}

OrdersApp::Outcome OrdersApp::Run(const v1::CreateOrderRequest& request,
                                  v1::Order* order) {
  handler_runs_.fetch_add(1, std::memory_order_relaxed);
  if (request.delay_ms() < 0 || request.delay_ms() > kMaxDelayMs) {
    return {::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT,
                           "delay_ms must be from 0 to 10000")};
  }
  if (request.fail_with() < 0 || request.fail_with() > 16) {
    return {::grpc::Status(::grpc::StatusCode::INVALID_ARGUMENT,
                           "fail_with must be a gRPC status code, 0 to 16")};
  }
  Outcome outcome;
  outcome.delay = std::chrono::milliseconds(request.delay_ms());
  if (request.fail_with() != 0) {
    outcome.status = ::grpc::Status(
        static_cast<::grpc::StatusCode>(request.fail_with()), "handler failed");
    return outcome;
  }
  order->set_id(
      instance_ + "-" + tag_ + "-" +
      std::to_string(next_order_.fetch_add(1, std::memory_order_relaxed)));
  order->set_item(request.item());
  order->set_quantity(request.quantity());
  order->set_instance(instance_);
  return outcome;
}

void OrdersApp::CreateOrder(const v1::CreateOrderRequest& request,
                            v1::Order* order,
                            std::function<void(::grpc::Status)> done) {
  Outcome outcome = Run(request, order);
  if (outcome.delay.count() == 0) {
    done(std::move(outcome.status));
    return;
  }
  // The timer owns itself until it fires: no thread waits meanwhile.
  auto timer =
      std::make_shared<boost::asio::steady_timer>(timers_, outcome.delay);
  timer->async_wait([timer, status = std::move(outcome.status),
                     done = std::move(done)](const auto&) mutable {
    done(std::move(status));
  });
}

boost::asio::awaitable<::grpc::Status> OrdersApp::CreateOrderAsync(
    const v1::CreateOrderRequest& request, v1::Order* order) {
  Outcome outcome = Run(request, order);
  if (outcome.delay.count() > 0) {
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor,
                                    outcome.delay);
    co_await timer.async_wait(boost::asio::use_awaitable);
  }
  co_return std::move(outcome.status);
}

void OrdersApp::GetStats(v1::Stats* stats) const {
  stats->set_handler_runs(handler_runs());
}

}  // namespace idem::grpc_demo
