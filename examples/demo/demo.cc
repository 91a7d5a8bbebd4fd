#include "demo.h"

#include <cstdlib>
#include <iostream>

#include "idem/beast/convert.h"
#include "idem/open_store.h"

namespace idem::demo {

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
  const LogSink log =
      options.log ? options.log : [](LogLevel level, std::string_view message) {
        if (level < LogLevel::kWarning) return;
        std::cerr << "idem-demo: " << LogLevelName(level) << ": " << message
                  << std::endl;
      };
  server_options.log = log;

  if (!options.idem) {
    demo->app_ = std::make_unique<DemoApp>(options.instance, nullptr);
    DemoApp* app = demo->app_.get();
    demo->server_ = std::make_unique<HttpServer>(
        server_options,
        [app](beast::Request r) { return app->Handle(std::move(r)); });
    return demo;
  }

  Store* sql_store = nullptr;  // The typed store inside, for /transfers.
  if (!store) {
    StoreOptions store_options;
    store_options.sweep_interval = options.sweep_interval;
    store_options.log = log;
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
  setup.options.ttl = options.ttl;
  setup.options.lock_timeout = options.lock_timeout;
  setup.options.lock_renewal = options.lock_renewal;
  setup.options.lock_wait = options.lock_wait;
  setup.options.key_per_operation = options.key_per_operation;
  setup.log = log;
  auto guard = Guard::Create(std::move(setup));
  if (!guard) return tl::unexpected(guard.error());
  demo->guard_ = std::move(*guard);

  Guard* g = demo->guard_.get();
  demo->app_ = std::make_unique<DemoApp>(
      options.instance, [g] { return g->metrics().RenderPrometheus(); });
  DemoApp* app = demo->app_.get();

  beast::IdempotentHandlerOptions handler_options;
  handler_options.store_threads = options.store_threads;
  handler_options.store_calls = options.store_calls;
  handler_options.log = log;
  // The demo does no authentication: the bearer token's text is the scope.
  handler_options.scope =
      [](const beast::RequestHeader& header) -> std::optional<std::string> {
    auto it = header.find(boost::beast::http::field::authorization);
    if (it == header.end()) return std::nullopt;
    const std::string_view value = beast::ToStd(it->value());
    constexpr std::string_view kBearer = "Bearer ";
    if (value.size() <= kBearer.size() ||
        !HeaderNameEquals(value.substr(0, kBearer.size()), kBearer)) {
      return std::nullopt;
    }
    return std::string(value.substr(kBearer.size()));
  };
  Transfers::Options transfer_options;
  transfer_options.instance = options.instance;
  transfer_options.exactly_once = options.exactly_once;
  transfer_options.scope = handler_options.scope;
  transfer_options.count_run = [app] { app->CountHandlerRun(); };
  transfer_options.log = log;
  auto transfers = Transfers::Create(demo->guard_, options.store_uri,
                                     std::move(transfer_options), sql_store);
  if (!transfers) return tl::unexpected(transfers.error());
  demo->transfers_ = std::move(*transfers);
  auto handler = beast::IdempotentHandler::Create(
      demo->guard_,
      [app](beast::Request r) { return app->Handle(std::move(r)); },
      std::move(handler_options));
  if (!handler) return tl::unexpected(handler.error());
  demo->handler_ = std::move(*handler);
  // Both with the guard's options: the same protection, one id space.
  for (const char* path : {"/orders", "/payments"}) {
    if (auto ok = demo->handler_->Protect(boost::beast::http::verb::post, path);
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
  Transfers* t = demo->transfers_.get();
  demo->server_ = std::make_unique<HttpServer>(
      server_options,
      [h, t](beast::Request r) {
        return Transfers::Matches(r) ? t->Handle(std::move(r))
                                     : (*h)(std::move(r));
      },
      std::move(hooks));
  return demo;
}

}  // namespace idem::demo
