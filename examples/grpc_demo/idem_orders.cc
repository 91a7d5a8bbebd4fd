#include "idem_orders.h"

namespace idem::grpc_demo {

Result<std::unique_ptr<::grpc::Service>> MakeIdemOrders(std::shared_ptr<Guard>,
                                                        OrdersApp*) {
  return MakeError(ErrorCode::kInvalidArgument, "idem::grpc: not yet");
}

}  // namespace idem::grpc_demo
