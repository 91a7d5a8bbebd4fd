// The Orders service with CreateOrder protected by idem::grpc: the key is
// the idempotency-key metadata (required), the scope the bearer token of
// `authorization: Bearer X` (X; the demo does no authentication), a call
// without one anonymous (one shared scope). GetStats is not protected.
//
// Thread-safety: the service's methods run concurrently on gRPC's threads.

#ifndef IDEM_GRPC_DEMO_IDEM_ORDERS_H_
#define IDEM_GRPC_DEMO_IDEM_ORDERS_H_

#include <memory>

#include <grpcpp/impl/service_type.h>

#include "idem/error.h"
#include "idem/guard.h"
#include "orders_app.h"

namespace idem::grpc_demo {

// The service over `guard` and `app` (which must outlive it). Errors: the
// adapter's, when it refuses its options.
Result<std::unique_ptr<::grpc::Service>> MakeIdemOrders(
    std::shared_ptr<Guard> guard, OrdersApp* app);

}  // namespace idem::grpc_demo

#endif  // IDEM_GRPC_DEMO_IDEM_ORDERS_H_
