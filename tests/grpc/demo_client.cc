#include "demo_client.h"

#include <cstdlib>
#include <memory>
#include <utility>

namespace idem::testing::grpc_demo {

std::string CallResult::Trailer(std::string_view name) const {
  auto it = trailers.find(std::string(name));
  return it == trailers.end() ? "" : it->second;
}

std::string Describe(const CallResult& r) {
  std::string text = "status " + std::to_string(r.status.error_code()) + " '" +
                     r.status.error_message() + "', order {" +
                     r.order.ShortDebugString() + "}, trailers:";
  for (const auto& [k, v] : r.trailers) text += " " + k + "=" + v;
  return text;
}

v1::CreateOrderRequest OrderRequest(std::string item, int quantity,
                                    int delay_ms, int fail_with) {
  v1::CreateOrderRequest r;
  r.set_item(std::move(item));
  r.set_quantity(quantity);
  r.set_delay_ms(delay_ms);
  r.set_fail_with(fail_with);
  return r;
}

namespace {

// An idle client channel reads the server's GOAWAY only when gRPC's backup
// poller runs (every 5 s by default), and a server shutting down gracefully
// waits for its clients to go: every test that stopped idem-grpc-demo with a
// client still open waited 5 s for nothing. Polled every 50 ms here; read by
// gRPC when it initializes, before this process's first channel.
std::shared_ptr<::grpc::Channel> NewChannel(std::uint16_t port) {
  static const bool configured = [] {
    ::setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "50",
             /*overwrite=*/0);
    return true;
  }();
  (void)configured;
  return ::grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                               ::grpc::InsecureChannelCredentials());
}

}  // namespace

DemoClient::DemoClient(std::uint16_t port)
    : stub_(v1::Orders::NewStub(NewChannel(port))) {}

CallResult DemoClient::CreateOrder(const v1::CreateOrderRequest& request,
                                   const CallOptions& options) {
  ::grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options.deadline);
  if (!options.key.empty()) context.AddMetadata("idempotency-key", options.key);
  if (!options.bearer.empty()) {
    context.AddMetadata("authorization", "Bearer " + options.bearer);
  }
  CallResult r;
  r.status = stub_->CreateOrder(&context, request, &r.order);
  for (const auto& [k, v] : context.GetServerTrailingMetadata()) {
    r.trailers.emplace(std::string(k.data(), k.size()),
                       std::string(v.data(), v.size()));
  }
  return r;
}

std::int64_t DemoClient::HandlerRuns() {
  ::grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  v1::Stats stats;
  const ::grpc::Status status =
      stub_->GetStats(&context, v1::GetStatsRequest(), &stats);
  return status.ok() ? stats.handler_runs() : -1;
}

}  // namespace idem::testing::grpc_demo
