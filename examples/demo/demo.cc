#include "demo.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "idem/beast/convert.h"
#include "idem/open_store.h"
#include "stored_responses.h"
#if IDEM_DEMO_WITH_RESTINIO
#include "http_server_restinio.h"
#include "idem/restinio/idempotent_handler.h"
#endif

namespace idem::demo {
namespace {

// The demo does no authentication: the bearer token's text is the scope.
std::optional<std::string> BearerScope(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() ||
      !HeaderNameEquals(authorization.substr(0, kBearer.size()), kBearer)) {
    return std::nullopt;
  }
  return std::string(authorization.substr(kBearer.size()));
}

}  // namespace

Result<HttpFramework> ParseHttpFlag(std::string_view text) {
  if (text == "beast") return HttpFramework::kBeast;
#if IDEM_DEMO_WITH_RESTINIO
  if (text == "restinio") return HttpFramework::kRestinio;
  constexpr std::string_view kChoices = "beast or restinio";
#else
  constexpr std::string_view kChoices =
      "beast (this build has no RESTinio: IDEM_WITH_RESTINIO)";
#endif
  return MakeError(ErrorCode::kInvalidArgument,
                   "--http wants " + std::string(kChoices) + ", got '" +
                       std::string(text) + "'");
}

std::string ResolveStoreUri(const std::optional<std::string>& flag) {
  if (flag) return *flag;
  if (const char* env = std::getenv("IDEM_STORE"); env && *env) return env;
  return std::string(kDefaultStoreUri);
}

Result<std::unique_ptr<Demo>> Demo::Create(DemoOptions options,
                                           std::shared_ptr<Store> store) {
  std::unique_ptr<Demo> demo(new Demo());
  HttpServerOptions server_options;
  server_options.host = options.host;
  server_options.port = options.port;
  server_options.threads = options.threads;
  server_options.max_connections = options.max_connections;
  // One sink for the server, the store's sweeper, the Guard and the adapter.
  // One write(2) per line: lines of concurrent requests never interleave.
  const LogSink log = options.log
                          ? options.log
                          : FileDescriptorLogSink(STDERR_FILENO, "idem-demo",
                                                  LogLevel::kWarning);
  server_options.log = log;

#if IDEM_DEMO_WITH_RESTINIO
  RestinioServerOptions restinio_options;
  restinio_options.host = options.host;
  restinio_options.port = options.port;
  restinio_options.threads = options.threads;
  restinio_options.max_connections = options.max_connections;
  restinio_options.log = log;
  // Long enough for the longest delay_ms the demo honours, after lock_wait.
  restinio_options.handle_request_timeout =
      std::chrono::milliseconds(DemoApp::kMaxDelayMs) +
      std::chrono::duration_cast<std::chrono::milliseconds>(
          server_options.io_timeout) +
      options.lock_wait;
#endif

  if (!options.idem) {
    demo->app_ = std::make_unique<DemoApp>(options.instance, nullptr,
                                           options.max_order_bytes);
    DemoApp* app = demo->app_.get();
#if IDEM_DEMO_WITH_RESTINIO
    if (options.http == HttpFramework::kRestinio) {
      demo->restinio_server_ =
          std::make_shared<RestinioServer>(restinio_options, app);
      return demo;
    }
#endif
    demo->server_ = std::make_unique<HttpServer>(
        server_options,
        [app](beast::Request r) { return app->Handle(std::move(r)); });
    return demo;
  }

  Store* sql_store = nullptr;  // The typed store inside, for /transfers.
  const auto metrics = std::make_shared<Metrics>();
  if (!store) {
    StoreOptions store_options;
    store_options.sweep_interval = options.sweep_interval;
    store_options.log = log;
    // The sweeper counts into the Guard's metrics: /metrics shows both.
    store_options.metrics = metrics;
    if (IsSqlStoreUri(options.store_uri)) {
      auto opened = Transfers::OpenSqlStore(options.store_uri, store_options);
      if (!opened) return tl::unexpected(opened.error());
      store = opened->store;
      sql_store = opened->typed;
    } else {
      auto opened = OpenStore(options.store_uri, store_options);
      if (!opened) return tl::unexpected(opened.error());
      store = std::shared_ptr<Store>(std::move(*opened));
    }
  }
  GuardSetup setup;
  setup.store = std::move(store);
  setup.metrics = metrics;
  setup.options.ttl = options.ttl;
  setup.options.lock_timeout = options.lock_timeout;
  setup.options.lock_renewal = options.lock_renewal;
  setup.options.lock_wait = options.lock_wait;
  setup.options.key_per_operation = options.key_per_operation;
  setup.options.response_keys = options.response_keys;
  // Every replay says until when its key replays.
  setup.options.on_replay = AddReplayExpiresHeader;
  setup.log = log;
  setup.enabled = options.protection;
  auto guard = Guard::Create(std::move(setup));
  if (!guard) return tl::unexpected(guard.error());
  demo->guard_ = std::move(*guard);
  // POST /orders with its own fingerprint fields, else the guard's options.
  std::shared_ptr<const GuardOptions> orders_route;
  if (!options.fingerprint_fields.empty()) {
    GuardOptions route = demo->guard_->options();
    route.fingerprint_fields = options.fingerprint_fields;
    auto made = Guard::MakeRouteOptions(std::move(route));
    if (!made) return tl::unexpected(made.error());
    orders_route = std::move(*made);
  }
  const auto route_of = [&orders_route](std::string_view path) {
    return path == "/orders" ? orders_route : nullptr;
  };

  Guard* g = demo->guard_.get();
  demo->app_ = std::make_unique<DemoApp>(
      options.instance, [g] { return g->metrics().RenderPrometheus(); },
      options.max_order_bytes, [g] { return g->enabled(); });
  DemoApp* app = demo->app_.get();

  // The demo does no authentication: the bearer token's text is the scope.
  const beast::ScopeResolver beast_scope =
      [](const beast::RequestHeader& header) -> std::optional<std::string> {
    auto it = header.find(boost::beast::http::field::authorization);
    if (it == header.end()) return std::nullopt;
    return BearerScope(beast::ToStd(it->value()));
  };
  // POST /transfers and GET /transfers/count, on either server: with a SQL
  // store POST /transfers is protected by the adapter like /orders, its
  // handler the claim-taking completion form on a pool of its own.
  Transfers::Options transfer_options;
  transfer_options.instance = options.instance;
  transfer_options.exactly_once = options.exactly_once;
  transfer_options.count_run = [app] { app->CountHandlerRun(); };
  transfer_options.log = log;
  auto transfers = Transfers::Create(demo->guard_, options.store_uri,
                                     std::move(transfer_options), sql_store);
  if (!transfers) return tl::unexpected(transfers.error());
  demo->transfers_ = std::move(*transfers);
  Transfers* t = demo->transfers_.get();

#if IDEM_DEMO_WITH_RESTINIO
  if (options.http == HttpFramework::kRestinio) {
    restinio::IdempotentHandlerOptions restinio_handler_options;
    restinio_handler_options.store_threads = options.store_threads;
    restinio_handler_options.store_calls = options.store_calls;
    restinio_handler_options.log = log;
    restinio_handler_options.scope =
        [](const ::restinio::request_t& request) -> std::optional<std::string> {
      const auto value =
          request.header().opt_value_of(::restinio::http_field::authorization);
      if (!value) return std::nullopt;
      return BearerScope({value->data(), value->size()});
    };
    demo->restinio_server_ =
        std::make_shared<RestinioServer>(restinio_options, app);
    auto handler = restinio::IdempotentHandler::Create(
        demo->guard_, demo->restinio_server_->io_context().get_executor(),
        std::move(restinio_handler_options));
    if (!handler) return tl::unexpected(handler.error());
    demo->restinio_handler_ = std::move(*handler);
    // Both with the guard's options: the same protection, one id space.
    for (const char* path : {"/orders", "/payments"}) {
      if (auto ok = demo->restinio_handler_->Protect(
              ::restinio::http_method_post(), path,
              [app](restinio::RequestHandle r) {
                return RestinioServer::Serve(app, std::move(r));
              },
              route_of(path));
          !ok) {
        return tl::unexpected(ok.error());
      }
    }
    if (t->protect()) {
      if (auto ok = demo->restinio_handler_->Protect(
              ::restinio::http_method_post(), "/transfers",
              [t](restinio::RequestHandle r, ClaimHandle& claim,
                  restinio::Responder done) {
                RestinioServer::ServeTransfers(t, std::move(r), claim,
                                               std::move(done));
              });
          !ok) {
        return tl::unexpected(ok.error());
      }
    }
    // The rest of /transfers (GET /transfers/count, 405, 501).
    demo->restinio_server_->set_transfers(t);
    demo->restinio_server_->set_body_limit(
        demo->restinio_handler_->BodyLimit());
    return demo;
  }
#endif

  beast::IdempotentHandlerOptions handler_options;
  handler_options.store_threads = options.store_threads;
  handler_options.store_calls = options.store_calls;
  handler_options.log = log;
  handler_options.scope = beast_scope;
  // One handler for every route; /transfers takes the request's claim.
  auto handler = beast::IdempotentHandler::Create(
      demo->guard_,
      [app, t](beast::Request r, ClaimHandle& claim) {
        return Transfers::Matches(r) ? t->Handle(std::move(r), claim)
                                     : app->Handle(std::move(r));
      },
      std::move(handler_options));
  if (!handler) return tl::unexpected(handler.error());
  demo->handler_ = std::move(*handler);
  // Both with the guard's options: the same protection, one id space.
  for (const char* path : {"/orders", "/payments", "/transfers"}) {
    if (std::string_view(path) == "/transfers" && !t->protect()) continue;
    if (auto ok = demo->handler_->Protect(boost::beast::http::verb::post, path,
                                          route_of(path));
        !ok) {
      return tl::unexpected(ok.error());
    }
  }

  beast::IdempotentHandler* h = demo->handler_.get();
  BodyLimitHooks hooks;
  hooks.apply =
      [h](boost::beast::http::request_parser<boost::beast::http::string_body>&
              parser) { return h->ApplyBodyLimit(parser); };
  hooks.too_large = [h](const beast::RequestHeader& header) {
    return h->TooLarge(header);
  };
  server_options.body_limit = h->BodyLimit(beast::RequestHeader());
  demo->server_ = std::make_unique<HttpServer>(
      server_options, [h](beast::Request r) { return (*h)(std::move(r)); },
      std::move(hooks));
  return demo;
}

}  // namespace idem::demo

namespace idem::demo {

#if IDEM_DEMO_WITH_RESTINIO
// Stops the servers' I/O threads, then waits for what posts to their I/O
// contexts (the /transfers pool's Responders, the adapter's store calls in
// flight), then destroys the server (and its I/O context) before the
// adapter goes.
Demo::~Demo() {
  if (server_) {
    server_->Shutdown();
    server_->Wait();
  }
  if (restinio_server_) {
    restinio_server_->Shutdown();
    restinio_server_->Wait();
  }
  if (transfers_) transfers_->pool().join();
  if (server_ && handler_) handler_->JoinStoreCalls();
  if (restinio_handler_) restinio_handler_->JoinStoreCalls();
  restinio_server_.reset();
}

Status Demo::Start() {
  if (restinio_server_) return restinio_server_->Start(restinio_handler_.get());
  return server_->Start();
}

std::uint16_t Demo::port() const {
  return restinio_server_ ? restinio_server_->port() : server_->port();
}

const std::string& Demo::host() const {
  return restinio_server_ ? restinio_server_->host() : server_->host();
}

void Demo::Shutdown() {
  if (restinio_server_) {
    restinio_server_->Shutdown();
  } else {
    server_->Shutdown();
  }
}

void Demo::Wait() {
  if (restinio_server_) {
    restinio_server_->Wait();
  } else {
    server_->Wait();
  }
}
#else
Demo::~Demo() {
  // As above: what posts to the I/O context ends before it goes.
  if (!server_) return;
  server_->Shutdown();
  server_->Wait();
  if (transfers_) transfers_->pool().join();
  if (handler_) handler_->JoinStoreCalls();
}
Status Demo::Start() { return server_->Start(); }
std::uint16_t Demo::port() const { return server_->port(); }
const std::string& Demo::host() const { return server_->host(); }
void Demo::Shutdown() { server_->Shutdown(); }
void Demo::Wait() { server_->Wait(); }
#endif

}  // namespace idem::demo
