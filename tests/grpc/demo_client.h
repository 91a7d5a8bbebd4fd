// A real gRPC client of idem-grpc-demo's Orders service (orders.proto), for
// the tests that run the demo process (support/demo_process.h): blocking
// calls with metadata and a deadline, the answer with its trailing
// metadata, and handler_runs from GetStats.
//
// Thread-safety: a DemoClient may be used from many threads at once (one
// channel, gRPC's stub is thread-safe).

#ifndef IDEM_TESTS_GRPC_DEMO_CLIENT_H_
#define IDEM_TESTS_GRPC_DEMO_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "orders.grpc.pb.h"

namespace idem::testing::grpc_demo {

namespace v1 = ::idem::demo::v1;

struct CallResult {
  ::grpc::Status status;
  v1::Order order;
  std::multimap<std::string, std::string> trailers;

  // The first value of trailing metadata `name`, or "".
  std::string Trailer(std::string_view name) const;
  // idempotent-replayed: true.
  bool replayed() const { return Trailer("idempotent-replayed") == "true"; }
};

// The call as text for failure messages: status, message, order, trailers.
std::string Describe(const CallResult& r);

struct CallOptions {
  // The idempotency-key metadata; empty: none.
  std::string key;
  // `authorization: Bearer <bearer>`; empty: none (anonymous).
  std::string bearer;
  std::chrono::milliseconds deadline{60000};
};

v1::CreateOrderRequest OrderRequest(std::string item, int quantity = 1,
                                    int delay_ms = 0, int fail_with = 0);

class DemoClient {
 public:
  explicit DemoClient(std::uint16_t port);

  CallResult CreateOrder(const v1::CreateOrderRequest& request,
                         const CallOptions& options);
  // GetStats' handler_runs, or -1 when the call failed.
  std::int64_t HandlerRuns();

 private:
  std::unique_ptr<v1::Orders::Stub> stub_;
};

}  // namespace idem::testing::grpc_demo

#endif  // IDEM_TESTS_GRPC_DEMO_CLIENT_H_
