#include "grpc_test_server.h"

// Boost 1.74's Asio coroutine headers use std::exchange without including
// <utility>; GCC 12's standard library no longer includes it transitively.
#include <utility>

#include <stdexcept>

#include <grpcpp/support/channel_arguments.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "idem/memory_store.h"

namespace idem::grpc_test {

using idem::grpc::Done;
using idem::grpc::ReplyMetadata;

namespace {

constexpr auto kBound = std::chrono::seconds(120);

// Depth of CallbackService::CreateOrder calls on this thread.
thread_local int create_order_depth = 0;

std::multimap<std::string, std::string> Copy(
    const std::multimap<::grpc::string_ref, ::grpc::string_ref>& in) {
  std::multimap<std::string, std::string> out;
  for (const auto& [k, v] : in) {
    out.emplace(std::string(k.data(), k.size()),
                std::string(v.data(), v.size()));
  }
  return out;
}

std::string One(const std::multimap<std::string, std::string>& m,
                const std::string& key) {
  const auto n = m.count(key);
  if (n == 0) return "";
  if (n > 1) return "<" + std::to_string(n) + " values>";
  return m.find(key)->second;
}

void Prepare(::grpc::ClientContext& context, const CallOptions& options) {
  for (const std::string& key : options.keys) {
    context.AddMetadata("idempotency-key", key);
  }
  for (const auto& [k, v] : options.metadata) context.AddMetadata(k, v);
  if (options.deadline) {
    context.set_deadline(std::chrono::system_clock::now() + *options.deadline);
  }
}

}  // namespace

void Gate::Close() {
  std::lock_guard lock(mu_);
  closed_ = true;
}

void Gate::Open() {
  std::vector<std::pair<Done, ::grpc::Status>> parked;
  {
    std::lock_guard lock(mu_);
    closed_ = false;
    parked.swap(parked_);
  }
  cv_.notify_all();
  for (auto& [done, status] : parked) done(status);
}

bool Gate::WaitHeld(int n) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, kBound, [&] { return held_ >= n; });
}

bool Gate::closed() {
  std::lock_guard lock(mu_);
  return closed_;
}

void Gate::Park(Done done, ::grpc::Status status) {
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      ++held_;
      parked_.emplace_back(std::move(done), std::move(status));
      cv_.notify_all();
      return;
    }
  }
  done(std::move(status));
}

void Gate::Block() {
  std::unique_lock lock(mu_);
  if (!closed_) return;
  ++held_;
  cv_.notify_all();
  cv_.wait_for(lock, kBound, [&] { return !closed_; });
}

LogSink LogLines::Sink() {
  return [this](LogLevel level, std::string_view message) {
    std::lock_guard lock(mu_);
    lines_.push_back(std::string(LogLevelName(level)) + ": " +
                     std::string(message));
  };
}

std::vector<std::string> LogLines::lines() {
  std::lock_guard lock(mu_);
  return lines_;
}

std::string Reply::Trailing(const std::string& key) const {
  return One(trailing, key);
}
std::string Reply::Initial(const std::string& key) const {
  return One(initial, key);
}

class TestServer::CallbackService final
    : public idem::test::v1::Orders::CallbackService {
 public:
  explicit CallbackService(
      idem::grpc::CallbackMethod<CreateOrderRequest, Order> create,
      TestServer& server)
      : create_(std::move(create)), server_(server) {}

  ::grpc::ServerUnaryReactor* CreateOrder(
      ::grpc::CallbackServerContext* context, const CreateOrderRequest* request,
      Order* response) override {
    {
      std::lock_guard lock(server_.threads_mu_);
      server_.grpc_threads_.insert(std::this_thread::get_id());
    }
    ++create_order_depth;
    ::grpc::ServerUnaryReactor* reactor = create_(context, request, response);
    --create_order_depth;
    return reactor;
  }
  ::grpc::ServerUnaryReactor* GetStats(::grpc::CallbackServerContext* context,
                                       const idem::test::v1::GetStatsRequest*,
                                       idem::test::v1::Stats* stats) override {
    stats->set_handler_runs(server_.runs());
    auto* reactor = context->DefaultReactor();
    reactor->Finish(::grpc::Status::OK);
    return reactor;
  }

 private:
  idem::grpc::CallbackMethod<CreateOrderRequest, Order> create_;
  TestServer& server_;
};

class TestServer::SyncService final : public idem::test::v1::Orders::Service {
 public:
  explicit SyncService(idem::grpc::SyncMethod<CreateOrderRequest, Order> create)
      : create_(std::move(create)) {}

  ::grpc::Status CreateOrder(::grpc::ServerContext* context,
                             const CreateOrderRequest* request,
                             Order* response) override {
    return create_(context, request, response);
  }

 private:
  idem::grpc::SyncMethod<CreateOrderRequest, Order> create_;
};

::grpc::Status TestServer::Handle(const CreateOrderRequest& request,
                                  Order& order, ReplyMetadata& metadata) {
  {
    std::lock_guard lock(threads_mu_);
    handler_threads_.insert(std::this_thread::get_id());
  }
  if (InCreateOrder()) ++runs_in_create_order_;
  const int n = ++runs_;
  order.set_id("order-" + std::to_string(n));
  order.set_item(request.item());
  order.set_quantity(request.quantity());
  metadata.AddInitial("x-order-version", std::to_string(n));
  metadata.AddTrailing("x-trace", "trace-" + std::to_string(n));
  metadata.AddTrailing("x-secret", "secret-" + std::to_string(n));
  if (request.fail_with() != 0) {
    return ::grpc::Status(static_cast<::grpc::StatusCode>(request.fail_with()),
                          "handler failed", kDetails);
  }
  return ::grpc::Status::OK;
}

std::set<std::thread::id> TestServer::grpc_threads() {
  std::lock_guard lock(threads_mu_);
  return grpc_threads_;
}

bool TestServer::InCreateOrder() { return create_order_depth > 0; }

std::set<std::thread::id> TestServer::handler_threads() {
  std::lock_guard lock(threads_mu_);
  return handler_threads_;
}

net::awaitable<::grpc::Status> TestServer::HandleLater(
    TestServer* server, const CreateOrderRequest& request, Order& order,
    ReplyMetadata& metadata) {
  // A real suspension: the handler resumes from the executor's queue.
  net::steady_timer timer(co_await net::this_coro::executor);
  timer.expires_after(std::chrono::milliseconds(1));
  co_await timer.async_wait(net::use_awaitable);
  if (request.item() == "throw") throw std::runtime_error("the handler threw");
  co_return server->Handle(request, order, metadata);
}

net::awaitable<::grpc::Status> TestServer::HandleNow(
    TestServer* server, const CreateOrderRequest& request, Order& order,
    ReplyMetadata& metadata) {
  if (request.item() == "throw") throw std::runtime_error("the handler threw");
  co_return server->Handle(request, order, metadata);
}

TestServer::TestServer(ServerSetup setup) {
  store_ = setup.store;
  if (!store_) {
    auto memory = MemoryStore::Open({});
    if (!memory) {
      error_ = memory.error().ToString();
      return;
    }
    store_ = std::move(*memory);
  }
  std::shared_ptr<Clock> clock = setup.clock;
  if (!clock) {
    manual_clock_ = std::make_shared<ManualClock>();
    clock = manual_clock_;
  }
  GuardSetup guard_setup;
  guard_setup.store = store_;
  guard_setup.options = setup.guard_options;
  guard_setup.clock = clock;
  guard_setup.log = setup.log;
  guard_setup.log_repeat_interval = Duration::zero();
  auto guard = Guard::Create(std::move(guard_setup));
  if (!guard) {
    error_ = guard.error().ToString();
    return;
  }
  guard_ = std::move(*guard);
  idem::grpc::IdempotentMethodsOptions options;
  options.guard = guard_;
  options.scope = setup.scope;
  options.calls = setup.calls;
  options.executor = setup.executor;
  if (!options.calls.log) options.calls.log = setup.log;
  auto methods = idem::grpc::IdempotentMethods::Create(std::move(options));
  if (!methods) {
    error_ = methods.error().ToString();
    return;
  }
  methods_ = std::move(*methods);

  if (setup.sync_api) {
    auto create = methods_->ProtectSync<CreateOrderRequest, Order>(
        kCreateOrder,
        [this](::grpc::ServerContextBase&, const CreateOrderRequest& request,
               Order& order, ReplyMetadata& metadata) {
          if (request.item() == "throw") {
            throw std::runtime_error("the handler threw");
          }
          ::grpc::Status status = Handle(request, order, metadata);
          gate_.Block();
          return status;
        },
        setup.method);
    if (!create) {
      error_ = create.error().ToString();
      return;
    }
    service_ = std::make_unique<SyncService>(std::move(*create));
  } else {
    Result<idem::grpc::CallbackMethod<CreateOrderRequest, Order>> create;
    if (setup.form == Form::kCoroutine) {
      create = methods_->ProtectCallback<CreateOrderRequest, Order>(
          kCreateOrder,
          [this](::grpc::ServerContextBase&, const CreateOrderRequest& request,
                 Order& order, ReplyMetadata& metadata) {
            return HandleLater(this, request, order, metadata);
          },
          setup.method);
    } else if (setup.form == Form::kReadyCoroutine) {
      create = methods_->ProtectCallback<CreateOrderRequest, Order>(
          kCreateOrder,
          [this](::grpc::ServerContextBase&, const CreateOrderRequest& request,
                 Order& order, ReplyMetadata& metadata) {
            return HandleNow(this, request, order, metadata);
          },
          setup.method);
    } else if (setup.form == Form::kSync) {
      create = methods_->ProtectCallback<CreateOrderRequest, Order>(
          kCreateOrder,
          [this](::grpc::ServerContextBase&, const CreateOrderRequest& request,
                 Order& order, ReplyMetadata& metadata) {
            if (request.item() == "throw") {
              throw std::runtime_error("the handler threw");
            }
            return Handle(request, order, metadata);
          },
          setup.method);
    } else {
      create = methods_->ProtectCallback<CreateOrderRequest, Order>(
          kCreateOrder,
          [this](::grpc::ServerContextBase&, const CreateOrderRequest& request,
                 Order& order, ReplyMetadata& metadata, Done done) {
            if (request.item() == "throw") {
              done.Fail(std::make_exception_ptr(
                  std::runtime_error("the handler threw")));
              return;
            }
            gate_.Park(std::move(done), Handle(request, order, metadata));
          },
          setup.method);
    }
    if (!create) {
      error_ = create.error().ToString();
      return;
    }
    service_ = std::make_unique<CallbackService>(std::move(*create), *this);
  }

  int port = 0;
  ::grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", ::grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_ || port == 0) {
    server_.reset();
    error_ = "the gRPC server did not start on 127.0.0.1:0";
    return;
  }
  address_ = "127.0.0.1:" + std::to_string(port);
  ::grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  channel_ = ::grpc::CreateCustomChannel(
      address_, ::grpc::InsecureChannelCredentials(), args);
  stub_ = idem::test::v1::Orders::NewStub(channel_);
}

TestServer::~TestServer() {
  gate_.Open();
  if (server_) server_->Shutdown();
  methods_.reset();
}

Reply TestServer::Call(const CreateOrderRequest& request,
                       const CallOptions& options) {
  ::grpc::ClientContext context;
  Prepare(context, options);
  Reply reply;
  if (options.started) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    stub_->async()->CreateOrder(&context, &request, &reply.order,
                                [&](::grpc::Status status) {
                                  std::lock_guard lock(mu);
                                  reply.status = std::move(status);
                                  done = true;
                                  cv.notify_all();
                                });
    options.started(context);
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, kBound, [&] { return done; })) {
      context.TryCancel();
      cv.wait(lock, [&] { return done; });
    }
  } else {
    reply.status = stub_->CreateOrder(&context, request, &reply.order);
  }
  reply.initial = Copy(context.GetServerInitialMetadata());
  reply.trailing = Copy(context.GetServerTrailingMetadata());
  return reply;
}

std::vector<Reply> TestServer::Burst(const CreateOrderRequest& request,
                                     const CallOptions& options, int n) {
  struct Pending {
    ::grpc::ClientContext context;
    Reply reply;
  };
  std::vector<std::unique_ptr<Pending>> calls;
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  for (int i = 0; i < n; ++i) {
    calls.push_back(std::make_unique<Pending>());
    Pending& p = *calls.back();
    Prepare(p.context, options);
    stub_->async()->CreateOrder(&p.context, &request, &p.reply.order,
                                [&mu, &cv, &finished, &p](::grpc::Status s) {
                                  std::lock_guard lock(mu);
                                  p.reply.status = std::move(s);
                                  ++finished;
                                  cv.notify_all();
                                });
  }
  {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, kBound, [&] { return finished == n; })) {
      for (auto& p : calls) p->context.TryCancel();
      cv.wait(lock, [&] { return finished == n; });
    }
  }
  std::vector<Reply> replies;
  for (auto& p : calls) {
    p->reply.initial = Copy(p->context.GetServerInitialMetadata());
    p->reply.trailing = Copy(p->context.GetServerTrailingMetadata());
    replies.push_back(std::move(p->reply));
  }
  return replies;
}

}  // namespace idem::grpc_test
