#include "transaction_test_server.h"

#include <utility>

namespace idem::testing {
namespace {

idem::Response Failed(const Error& error) {
  return idem::Response{500, {}, error.message()};
}

std::shared_ptr<const GuardOptions> OptionalKey(GuardOptions options) {
  options.key_required = false;
  return ValueOrThrow(Guard::MakeRouteOptions(options));
}

// The application's transaction: SqliteTransaction on a connection of its
// own, App::before_begin before its BEGIN. The store's own writes wait for
// BEGIN IMMEDIATE's lock, so what races the handler (a takeover) comes while
// it runs, before its transaction opens.
class AppTransaction {
 public:
  explicit AppTransaction(App& app)
      : db_(Open(app.path)),
        sqlite_(*app.store, db_),
        tx_(sqlite_, app.before_begin) {}
  ~AppTransaction() { sqlite3_close(db_); }
  AppTransaction(const AppTransaction&) = delete;
  AppTransaction& operator=(const AppTransaction&) = delete;

  HookedTransaction<SqliteTransaction>& tx() { return tx_; }
  sqlite3* db() const { return db_; }

 private:
  static sqlite3* Open(const std::string& path) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 30000);
    return db;
  }

  sqlite3* db_;
  SqliteTransaction sqlite_;
  HookedTransaction<SqliteTransaction> tx_;
};

// The transfer (App::Insert and the record's completion in one
// transaction) through Beast's RunInTransaction: its answer, or a 500.
beast::Response BeastTransfer(App* app, const beast::Request& req,
                              ClaimHandle& claim) {
  AppTransaction t(*app);
  auto res = beast::RunInTransaction(t.tx(), claim, [&](auto&) {
    return beast::ToBeast(app->Insert(t.db(), req.body()), req.version(),
                          req.keep_alive());
  });
  return res ? std::move(*res) : beast::ToBeast(Failed(res.error()), 11, false);
}

// The Beast handler: the claim-taking forms over beast::RunInTransaction.
beast::Handler BeastHandler(App* app) {
  return [app](beast::Request req, ClaimHandle& claim, beast::Responder done) {
    const std::string path(beast::ToStd(req.target()));
    if (path == "/plain") {
      done(beast::ToBeast(App::Created(req.body()), req.version(),
                          req.keep_alive()));
      return;
    }
    net::post(app->pool, [app, req = std::move(req), &claim,
                          done = std::move(done)]() mutable {
      try {
        done(BeastTransfer(app, req, claim));
      } catch (...) {
        done.Fail(std::current_exception());
      }
    });
  };
}

beast::Handler BeastSyncHandler(App* app) {
  return [app](beast::Request req, ClaimHandle& claim) {
    return BeastTransfer(app, req, claim);
  };
}

#if IDEM_DEMO_WITH_RESTINIO
// BeastTransfer through RESTinio's RunInTransaction.
idem::Response RestinioTransfer(App* app, const restinio::RequestHandle& req,
                                ClaimHandle& claim) {
  AppTransaction t(*app);
  auto res = restinio::RunInTransaction(
      t.tx(), claim, [&](auto&) { return app->Insert(t.db(), req->body()); });
  return res ? std::move(*res) : Failed(res.error());
}
#endif

}  // namespace

TxServer::TxServer(demo::HttpFramework http, std::shared_ptr<Store> store,
                   std::shared_ptr<Clock> clock, GuardOptions options,
                   App* app) {
  if (http == demo::HttpFramework::kBeast) {
    beast::Handler tx = BeastHandler(app);
    beast::Handler sync = BeastSyncHandler(app);
    auto optional = OptionalKey(options);
    AdapterSetup setup;
    setup.store = store;
    setup.options = options;
    setup.clock = std::move(clock);
    for (const char* path : {"/tx", "/plain", "/sync"}) {
      setup.routes.push_back({.pattern = path});
    }
    setup.routes.push_back({.pattern = "/opt", .options = optional});
    beast_ = std::make_unique<AdapterServer>(
        demo::HttpFramework::kBeast,
        [tx, sync](beast::Request r, ClaimHandle& claim) {
          return beast::ToStd(r.target()) == "/sync" ? sync(std::move(r), claim)
                                                     : tx(std::move(r), claim);
        },
        std::move(setup));
    return;
  }
#if IDEM_DEMO_WITH_RESTINIO
  StartRestinio(std::move(store), std::move(clock), std::move(options), app);
#endif
}

#if IDEM_DEMO_WITH_RESTINIO
void TxServer::StartRestinio(std::shared_ptr<Store> store,
                             std::shared_ptr<Clock> clock, GuardOptions options,
                             App* app) {
  GuardSetup setup;
  setup.store = std::move(store);
  setup.clock = std::move(clock);
  setup.options = options;
  setup.log = [](LogLevel, std::string_view) {};
  guard_ = ValueOrThrow(Guard::Create(std::move(setup)));
  restinio::IdempotentHandlerOptions idem_options;
  idem_options.scope = ::idem::asio::SharedScope();
  idem_ = ValueOrThrow(restinio::IdempotentHandler::Create(
      guard_, ioc_.get_executor(), std::move(idem_options)));
  restinio::Handler tx = [app](restinio::RequestHandle req, ClaimHandle& claim,
                               restinio::Responder done) {
    net::post(app->pool, [app, req, &claim, done = std::move(done)]() mutable {
      try {
        done(RestinioTransfer(app, req, claim));
      } catch (...) {
        done.Fail(std::current_exception());
      }
    });
  };
  restinio::Handler sync = [app](restinio::RequestHandle req,
                                 ClaimHandle& claim) {
    return RestinioTransfer(app, req, claim);
  };
  restinio::Handler plain = [](restinio::RequestHandle req) {
    return App::Created(req->body());
  };
  const auto post = ::restinio::http_method_post();
  ValueOrThrow(idem_->Protect(post, "/tx", tx));
  ValueOrThrow(idem_->Protect(post, "/sync", sync));
  ValueOrThrow(idem_->Protect(post, "/plain", plain));
  ValueOrThrow(idem_->Protect(post, "/opt", tx, OptionalKey(options)));
  ::restinio::server_settings_t<Traits> settings;
  settings.port(0)
      .address("127.0.0.1")
      .acceptor_post_bind_hook([this](net::ip::tcp::acceptor& a) {
        restinio_port_ = a.local_endpoint().port();
      })
      .handle_request_timeout(std::chrono::seconds(120))
      .request_handler(idem_->ChainHandler());
  server_ = std::make_unique<::restinio::http_server_t<Traits>>(
      ::restinio::external_io_context(ioc_), std::move(settings));
  server_->open_sync();
  work_.emplace(ioc_.get_executor());
  io_ = std::thread([this] { ioc_.run(); });
}
#endif

TxServer::~TxServer() {
#if IDEM_DEMO_WITH_RESTINIO
  if (server_) {
    net::post(ioc_, [this] {
      server_->close_sync();
      work_.reset();
      ioc_.stop();
    });
    io_.join();
    idem_->JoinStoreCalls();
    ioc_.shutdown();
    server_.reset();
  }
#endif
}

}  // namespace idem::testing
