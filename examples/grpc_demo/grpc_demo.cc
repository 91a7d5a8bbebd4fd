#include "grpc_demo.h"

#include <unistd.h>

#include <utility>

#include <grpcpp/grpcpp.h>

#include "idem/open_store.h"
#include "idem/store_uri.h"
#include "idem_orders.h"
#include "orders.grpc.pb.h"

namespace idem::grpc_demo {
namespace {

// The service without idem: CreateOrder straight to the application.
class PlainOrders final : public v1::Orders::CallbackService {
 public:
  explicit PlainOrders(OrdersApp* app) : app_(app) {}

  ::grpc::ServerUnaryReactor* CreateOrder(
      ::grpc::CallbackServerContext* context,
      const v1::CreateOrderRequest* request, v1::Order* order) override {
    ::grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    app_->CreateOrder(*request, order, [reactor](::grpc::Status status) {
      reactor->Finish(std::move(status));
    });
    return reactor;
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
};

}  // namespace

GrpcDemo::GrpcDemo(GrpcDemoOptions options)
    : options_(std::move(options)), work_(timers_.get_executor()) {}

Result<std::unique_ptr<GrpcDemo>> GrpcDemo::Create(GrpcDemoOptions options) {
  std::unique_ptr<GrpcDemo> demo(new GrpcDemo(std::move(options)));
  const GrpcDemoOptions& o = demo->options_;
  demo->app_ =
      std::make_unique<OrdersApp>(o.instance, demo->timers_.get_executor());
  if (!o.idem) {
    demo->service_ = std::make_unique<PlainOrders>(demo->app_.get());
    return demo;
  }
  const LogSink log =
      o.log ? o.log
            : FileDescriptorLogSink(STDERR_FILENO, "idem-grpc-demo",
                                    LogLevel::kWarning);
  StoreOptions store_options;
  store_options.log = log;
  auto store = OpenStore(o.store_uri, store_options);
  if (!store) return tl::unexpected(store.error());
  GuardSetup setup;
  setup.store = std::shared_ptr<Store>(std::move(*store));
  setup.options.ttl = o.ttl;
  setup.options.lock_timeout = o.lock_timeout;
  setup.options.lock_renewal = o.lock_renewal;
  setup.options.lock_wait = o.lock_wait;
  setup.log = log;
  auto guard = Guard::Create(std::move(setup));
  if (!guard) return tl::unexpected(guard.error());
  demo->guard_ = std::move(*guard);
  idem::asio::GuardCallOptions calls;
  calls.log = log;
  auto service = MakeIdemOrders(demo->guard_, demo->app_.get(),
                                demo->timers_.get_executor(), calls);
  if (!service) return tl::unexpected(service.error());
  demo->service_ = std::move(*service);
  return demo;
}

GrpcDemo::~GrpcDemo() {
  if (server_) {
    Shutdown();
    Wait();
  }
  // The adapter (in the service) waits for its coroutines on the timers'
  // threads, which must still run: it goes first, then they stop.
  service_.reset();
  work_.reset();
  timers_.stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

Status GrpcDemo::Start() {
  for (int i = 0; i < options_.threads; ++i) {
    threads_.emplace_back([this] { timers_.run(); });
  }
  const bool v6 = options_.host.find(':') != std::string::npos;
  const std::string address = (v6 ? "[" + options_.host + "]" : options_.host) +
                              ":" + std::to_string(options_.port);
  int port = 0;
  ::grpc::ServerBuilder builder;
  builder.AddListeningPort(address, ::grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0) {
    server_.reset();
    return MakeError(ErrorCode::kUnavailable,
                     "cannot listen on " + address +
                         " (in use, or not an address of this host?)");
  }
  port_ = static_cast<std::uint16_t>(port);
  return {};
}

void GrpcDemo::Shutdown() {
  if (!server_) return;
  // In-flight calls get up to the longest delay_ms to finish; a call still
  // running after that is cancelled (its handler's result is still stored).
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(OrdersApp::kMaxDelayMs));
}

void GrpcDemo::Wait() {
  if (!server_) return;
  server_->Wait();
  server_.reset();
}

}  // namespace idem::grpc_demo
