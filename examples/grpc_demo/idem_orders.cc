#include "idem_orders.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "idem/grpc/idempotent_methods.h"
#include "orders.grpc.pb.h"

namespace idem::grpc_demo {
namespace {

// `authorization: Bearer X` → X; anything else (no authorization, another
// scheme, the metadata twice) is anonymous.
std::optional<std::string> BearerScope(
    const ::grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  if (metadata.count("authorization") != 1) return std::nullopt;
  const auto value = metadata.find("authorization")->second;
  const std::string_view text(value.data(), value.size());
  constexpr std::string_view kBearer = "Bearer ";
  if (text.size() <= kBearer.size() || !text.starts_with(kBearer)) {
    return std::nullopt;
  }
  return std::string(text.substr(kBearer.size()));
}

class IdemOrders final : public v1::Orders::CallbackService {
 public:
  IdemOrders(OrdersApp* app,
             std::unique_ptr<idem::grpc::IdempotentMethods> methods,
             idem::grpc::CallbackMethod<v1::CreateOrderRequest, v1::Order>
                 create_order)
      : app_(app),
        methods_(std::move(methods)),
        create_order_(std::move(create_order)) {}

  ::grpc::ServerUnaryReactor* CreateOrder(
      ::grpc::CallbackServerContext* context,
      const v1::CreateOrderRequest* request, v1::Order* order) override {
    return create_order_(context, request, order);
  }

  ::grpc::ServerUnaryReactor* GetStats(::grpc::CallbackServerContext* context,
                                       const v1::GetStatsRequest*,
                                       v1::Stats* stats) override {
    app_->GetStats(stats);
    ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(::grpc::Status::OK);
    return reactor;
  }

 private:
  OrdersApp* app_;
  std::unique_ptr<idem::grpc::IdempotentMethods> methods_;
  idem::grpc::CallbackMethod<v1::CreateOrderRequest, v1::Order> create_order_;
};

}  // namespace

Result<std::unique_ptr<::grpc::Service>> MakeIdemOrders(
    std::shared_ptr<Guard> guard, OrdersApp* app,
    boost::asio::any_io_executor executor, idem::asio::GuardCallOptions calls) {
  IDEM_ASSIGN_OR_RETURN(auto methods, idem::grpc::IdempotentMethods::Create({
                                          .guard = std::move(guard),
                                          .scope = BearerScope,
                                          .executor = std::move(executor),
                                          .calls = std::move(calls),
                                      }));
  // The coroutine form: it waits delay_ms on a timer of the adapter's
  // executor, holding no thread meanwhile, and resumes there; without a
  // delay it completes without suspending, and on the memory store the
  // whole call is then served on the gRPC thread that started it.
  IDEM_ASSIGN_OR_RETURN(
      auto create_order,
      (methods->ProtectCallback<v1::CreateOrderRequest, v1::Order>(
          "/idem.demo.v1.Orders/CreateOrder",
          [app](::grpc::ServerContextBase&,
                const v1::CreateOrderRequest& request,
                v1::Order& order) -> boost::asio::awaitable<::grpc::Status> {
            return app->CreateOrderAsync(request, &order);
          })));
  return std::make_unique<IdemOrders>(app, std::move(methods),
                                      std::move(create_order));
}

}  // namespace idem::grpc_demo
