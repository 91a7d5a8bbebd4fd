// The smallest complete gRPC service on idem::grpc (docs/GRPC.md shows this
// file): Orders.CreateOrder of orders.proto made idempotent with the
// idempotency-key metadata, over a memory store, on 127.0.0.1:50051.
// idem-grpc-demo (main.cc, grpc_demo.cc, idem_orders.cc) is the same with
// flags, any store, a handler that waits and the --no-idem baseline.

#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "idem/grpc/idempotent_methods.h"
#include "idem/open_store.h"
#include "orders.grpc.pb.h"

namespace v1 = idem::demo::v1;

// The service: its protected method forwards to the adapter's CallbackMethod.
class Orders final : public v1::Orders::CallbackService {
 public:
  explicit Orders(idem::grpc::CallbackMethod<v1::CreateOrderRequest, v1::Order>
                      create_order)
      : create_order_(std::move(create_order)) {}

  grpc::ServerUnaryReactor* CreateOrder(grpc::CallbackServerContext* context,
                                        const v1::CreateOrderRequest* request,
                                        v1::Order* order) override {
    return create_order_(context, request, order);
  }

 private:
  idem::grpc::CallbackMethod<v1::CreateOrderRequest, v1::Order> create_order_;
};

int main() {
  // 1. A Guard over a store (any URI: rocksdb:, postgresql://..., redis://).
  idem::GuardSetup setup;
  setup.store =
      std::shared_ptr<idem::Store>(std::move(*idem::OpenStore("memory:")));
  std::shared_ptr<idem::Guard> guard =
      std::move(*idem::Guard::Create(std::move(setup)));

  // 2. The adapter, with the scope every key belongs to: here the caller's
  //    `authorization` value (a real service puts the verified identity
  //    here); no such metadata is anonymous (one shared scope).
  auto methods = std::move(*idem::grpc::IdempotentMethods::Create({
      .guard = guard,
      .scope = [](const grpc::ServerContextBase& context)
          -> std::optional<std::string> {
        auto it = context.client_metadata().find("authorization");
        if (it == context.client_metadata().end()) return std::nullopt;
        return std::string(it->second.data(), it->second.size());
      },
  }));

  // 3. The method's implementation, unchanged: (context, request) ->
  //    (status, response). It runs once per key; retries get its answer.
  std::atomic<int> next{1};
  auto create_order =
      methods->ProtectCallback<v1::CreateOrderRequest, v1::Order>(
          "/idem.demo.v1.Orders/CreateOrder",
          [&next](grpc::ServerContextBase&,
                  const v1::CreateOrderRequest& request, v1::Order& order) {
            if (request.quantity() <= 0) {
              return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "quantity must be positive");
            }
            order.set_id("order-" + std::to_string(next++));
            order.set_item(request.item());
            order.set_quantity(request.quantity());
            return grpc::Status::OK;
          });
  if (!create_order) {
    std::fprintf(stderr, "%s\n", create_order.error().message().c_str());
    return 1;
  }

  // 4. A gRPC server as usual.
  Orders service(std::move(*create_order));
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:50051",
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return 1;
  std::printf("listening on 127.0.0.1:50051\n");
  std::fflush(stdout);
  server->Wait();  // Shutdown order: the server, then `methods`, then `guard`.
}
