// The Orders service with CreateOrder protected by idem::grpc — the whole
// of what a service adds to use idem (docs/GRPC.md shows it): the key is
// the idempotency-key metadata (required), the scope the bearer token of
// `authorization: Bearer X` (X; the demo does no authentication, a real
// service puts the verified token's subject here), a call without one
// anonymous (one shared scope). GetStats is not protected.
//
// Thread-safety: the service's methods run concurrently on gRPC's threads;
// the protected handler on `executor`.

#ifndef IDEM_GRPC_DEMO_IDEM_ORDERS_H_
#define IDEM_GRPC_DEMO_IDEM_ORDERS_H_

#include <memory>

#include <grpcpp/impl/service_type.h>
#include <boost/asio/any_io_executor.hpp>

#include "idem/asio/guard_calls.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "orders_app.h"

namespace idem::grpc_demo {

// The service over `guard` and `app` (which must outlive it). Protected
// calls run on `executor`, whose context must keep running until the
// service is destroyed (after the gRPC server: IdempotentMethods'
// shutdown order). Errors: the adapter's, when it refuses its options.
Result<std::unique_ptr<::grpc::Service>> MakeIdemOrders(
    std::shared_ptr<Guard> guard, OrdersApp* app,
    boost::asio::any_io_executor executor, idem::asio::GuardCallOptions calls);

}  // namespace idem::grpc_demo

#endif  // IDEM_GRPC_DEMO_IDEM_ORDERS_H_
