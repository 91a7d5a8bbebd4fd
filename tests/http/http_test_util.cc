#include "http_test_util.h"

#include <cctype>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "idem/beast/convert.h"
#include "idem/open_store.h"
#include "idem/testing/status_matchers.h"
#if IDEM_DEMO_WITH_RESTINIO
#include "http_server_restinio.h"
#include "idem/restinio/idempotent_handler.h"
#endif

namespace idem::testing {
namespace {

using boost::beast::error_code;

void ThrowIf(const error_code& ec, const char* what) {
  if (ec) throw boost::system::system_error(ec, what);
}

}  // namespace

TestClient::TestClient(std::uint16_t port) : stream_(ioc_) {
  error_code ec;
  stream_.expires_after(kIoTimeout);
  stream_.async_connect(boost::asio::ip::tcp::endpoint(
                            boost::asio::ip::make_address("127.0.0.1"), port),
                        [&](error_code e) { ec = e; });
  ioc_.run();
  ThrowIf(ec, "connect");
}

Response TestClient::Send(const Request& request) {
  Write(Serialize(request));
  return Read();
}

void TestClient::Write(std::string_view bytes) {
  error_code ec;
  stream_.expires_after(kIoTimeout);
  boost::asio::async_write(stream_, boost::asio::buffer(bytes),
                           [&](error_code e, std::size_t) { ec = e; });
  ioc_.restart();
  ioc_.run();
  ThrowIf(ec, "write");
}

Response TestClient::Read() {
  error_code ec;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::uint64_t{64} << 20);
  stream_.expires_after(kIoTimeout);
  http::async_read(stream_, buffer_, parser,
                   [&](error_code e, std::size_t) { ec = e; });
  ioc_.restart();
  ioc_.run();
  ThrowIf(ec, "read");
  return parser.release();
}

bool TestClient::ReadsEof() {
  error_code ec;
  char byte;
  if (buffer_.size() > 0) return false;
  stream_.expires_after(kIoTimeout);
  stream_.async_read_some(boost::asio::buffer(&byte, 1),
                          [&](error_code e, std::size_t) { ec = e; });
  ioc_.restart();
  ioc_.run();
  return ec == boost::asio::error::eof ||
         ec == boost::asio::error::connection_reset;
}

void TestClient::Close() {
  error_code ignored;
  stream_.socket().close(ignored);
}

Request Post(std::string target, std::string body,
             std::optional<std::string> key, const Headers& headers) {
  Request req(http::verb::post, target, 11);
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  if (key) req.set("Idempotency-Key", *key);
  for (const auto& [name, value] : headers) req.insert(name, value);
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

Request Get(std::string target) {
  Request req(http::verb::get, target, 11);
  req.set(http::field::host, "127.0.0.1");
  return req;
}

std::string Serialize(Request request) {
  request.prepare_payload();
  std::ostringstream out;
  out << request;
  return out.str();
}

Response SendOnce(std::uint16_t port, const Request& request) {
  TestClient client(port);
  return client.Send(request);
}

nlohmann::json Json(const Response& response) {
  return nlohmann::json::parse(response.body(), nullptr, false);
}

std::string HeaderOf(const Response& response, std::string_view name) {
  auto it = response.find(boost::beast::string_view(name.data(), name.size()));
  return it == response.end() ? std::string()
                              : std::string(beast::ToStd(it->value()));
}

bool HasHeader(const Response& response, std::string_view name) {
  return response.find(boost::beast::string_view(name.data(), name.size())) !=
         response.end();
}

bool IsReplay(const Response& response) {
  return HeaderOf(response, "Idempotent-Replayed") == "true";
}

std::string ProblemMismatch(const Response& response, unsigned status,
                            std::string_view code) {
  std::ostringstream why;
  if (response.result_int() != status) {
    why << "status " << response.result_int() << " != " << status << "; ";
  }
  if (HeaderOf(response, "Content-Type") != "application/problem+json") {
    why << "content type '" << HeaderOf(response, "Content-Type") << "'; ";
  }
  const auto body = Json(response);
  if (body.is_discarded() || !body.is_object()) {
    why << "body is not a JSON object: " << response.body();
    return why.str();
  }
  if (body.value("code", "") != code) why << "code " << body["code"] << "; ";
  if (body.value("status", 0) != static_cast<int>(status)) {
    why << "status member " << body["status"] << "; ";
  }
  for (const char* member : {"type", "title", "detail"}) {
    if (!body.contains(member)) why << "no " << member << "; ";
  }
  // `instance` is the request path; a request refused before its target
  // was read (bad_request, request_header_too_large) has none, and then the
  // member is omitted, never empty.
  if (body.contains("instance")) {
    if (body.value("instance", "").empty()) why << "empty instance; ";
  } else if (code != "bad_request" && code != "request_header_too_large") {
    why << "no instance; ";
  }
  return why.str();
}

std::string HttpServerName(demo::HttpFramework http) {
  switch (http) {
    case demo::HttpFramework::kBeast:
      return "Beast";
    case demo::HttpFramework::kRestinio:
      return "Restinio";
  }
  return "Unknown";
}

std::string HttpFlag(demo::HttpFramework http) {
  std::string name = HttpServerName(http);
  for (char& c : name) c = static_cast<char>(std::tolower(c));
  return name;
}

std::shared_ptr<Store> OpenMemoryStore(std::string_view uri) {
  // No sweeper: tests run the Guard on a ManualClock, whose times the
  // sweeper's system clock would take for long expired.
  return ValueOrThrow(OpenStore(uri, {.sweep_interval = Duration::zero()}));
}

DemoServer::DemoServer(demo::DemoOptions options,
                       std::shared_ptr<Store> store) {
  options.host = "127.0.0.1";
  options.port = 0;
  if (options.store_uri.empty()) options.store_uri = "memory:";
  // Quiet unless the test listens.
  if (!options.log) options.log = [](LogLevel, std::string_view) {};
  demo_ =
      ValueOrThrow(demo::Demo::Create(std::move(options), std::move(store)));
  ValueOrThrow(demo_->Start());
}

DemoServer::~DemoServer() {
  demo_->Shutdown();
  demo_->Wait();
}

namespace {

#if IDEM_DEMO_WITH_RESTINIO
::restinio::http_method_id_t RestinioMethod(std::string_view method) {
  if (method == "POST") return ::restinio::http_method_post();
  if (method == "PUT") return ::restinio::http_method_put();
  if (method == "PATCH") return ::restinio::http_method_patch();
  if (method == "DELETE") return ::restinio::http_method_delete();
  if (method == "GET") return ::restinio::http_method_get();
  throw std::invalid_argument("no RESTinio method for " + std::string(method));
}

// A parameter, not a capture: the frame owns it (see idem/asio/handler.h).
boost::asio::awaitable<idem::Response> RunBeastHandler(
    beast::Handler handler, restinio::RequestHandle request) {
  co_return beast::FromBeast(co_await handler(demo::ToBeastRequest(*request)));
}

// `handler` over RESTinio's request handle, in its own form: a synchronous
// one stays synchronous (the adapter's straight-through path), the others
// become a coroutine.
restinio::Handler ForRestinio(beast::Handler handler) {
  if (handler.synchronous()) {
    return [handler](restinio::RequestHandle request) {
      return beast::FromBeast(
          handler.RunSynchronous(demo::ToBeastRequest(*request)));
    };
  }
  return [handler](restinio::RequestHandle request) {
    return RunBeastHandler(handler, std::move(request));
  };
}
#endif

// Each adapter's scope option for `scope`, and its options for `setup`
// (the store-call options and the scope).
beast::ScopeResolver BeastScope(TestScope scope) {
  switch (scope) {
    case TestScope::kShared:
      return ::idem::asio::SharedScope();
    case TestScope::kCaller:
      return
          [](const beast::RequestHeader& header) -> std::optional<std::string> {
            auto it = header.find(kCallerHeader);
            if (it == header.end()) return std::nullopt;
            return std::string(it->value());
          };
    case TestScope::kUnset:
      break;
  }
  return {};
}

beast::IdempotentHandlerOptions BeastOptions(const AdapterSetup& setup) {
  beast::IdempotentHandlerOptions options;
  static_cast<::idem::asio::GuardCallOptions&>(options) = setup.calls;
  options.scope = BeastScope(setup.scope);
  return options;
}

#if IDEM_DEMO_WITH_RESTINIO
restinio::ScopeResolver RestinioScope(TestScope scope) {
  switch (scope) {
    case TestScope::kShared:
      return ::idem::asio::SharedScope();
    case TestScope::kCaller:
      return [](const ::restinio::request_t& request)
                 -> std::optional<std::string> {
        const auto value = request.header().opt_value_of(kCallerHeader);
        if (!value) return std::nullopt;
        return std::string(value->data(), value->size());
      };
    case TestScope::kUnset:
      break;
  }
  return {};
}

restinio::IdempotentHandlerOptions RestinioOptions(const AdapterSetup& setup) {
  restinio::IdempotentHandlerOptions options;
  static_cast<::idem::asio::GuardCallOptions&>(options) = setup.calls;
  options.scope = RestinioScope(setup.scope);
  return options;
}
#endif

std::shared_ptr<Guard> MakeGuard(AdapterSetup& setup) {
  GuardSetup guard_setup;
  guard_setup.store = setup.store ? std::move(setup.store) : OpenMemoryStore();
  guard_setup.clock = std::move(setup.clock);
  guard_setup.log = [](LogLevel, std::string_view) {};
  guard_setup.options = std::move(setup.options);
  return ValueOrThrow(Guard::Create(std::move(guard_setup)));
}

}  // namespace

Status CreateAdapter(demo::HttpFramework http, const AdapterSetup& setup) {
  AdapterSetup copy = setup;
  std::shared_ptr<Guard> guard = MakeGuard(copy);
  if (http == demo::HttpFramework::kRestinio) {
#if IDEM_DEMO_WITH_RESTINIO
    boost::asio::io_context ioc;
    auto created = restinio::IdempotentHandler::Create(
        guard, ioc.get_executor(), RestinioOptions(setup));
    if (!created) return tl::unexpected(created.error());
    return {};
#else
    throw std::invalid_argument("this build has no RESTinio");
#endif
  }
  auto created = beast::IdempotentHandler::Create(
      guard, [](Request) { return Response(); }, BeastOptions(setup));
  if (!created) return tl::unexpected(created.error());
  return {};
}

AdapterServer::AdapterServer(demo::HttpFramework http, beast::Handler handler,
                             AdapterSetup setup) {
  guard_ = MakeGuard(setup);

  if (http == demo::HttpFramework::kRestinio) {
#if IDEM_DEMO_WITH_RESTINIO
    const restinio::Handler converted = ForRestinio(std::move(handler));
    demo::RestinioServerOptions server_options;
    server_options.port = 0;
    restinio_server_ =
        std::make_shared<demo::RestinioServer>(server_options, converted);
    restinio_handler_ = ValueOrThrow(restinio::IdempotentHandler::Create(
        guard_, restinio_server_->io_context().get_executor(),
        RestinioOptions(setup)));
    for (const ProtectedRoute& route : setup.routes) {
      ValueOrThrow(restinio_handler_->Protect(RestinioMethod(route.method),
                                              route.pattern, converted,
                                              route.options));
    }
    restinio_server_->set_body_limit(restinio_handler_->BodyLimit());
    ValueOrThrow(restinio_server_->Start(restinio_handler_.get()));
    return;
#else
    throw std::invalid_argument("this build has no RESTinio");
#endif
  }

  beast_handler_ = ValueOrThrow(beast::IdempotentHandler::Create(
      guard_, std::move(handler), BeastOptions(setup)));
  for (const ProtectedRoute& route : setup.routes) {
    ValueOrThrow(beast_handler_->Protect(http::string_to_verb(route.method),
                                         route.pattern, route.options));
  }
  beast::IdempotentHandler* adapter = beast_handler_.get();
  demo::HttpServerOptions server_options;
  server_options.port = 0;
  demo::BodyLimitHooks hooks;
  hooks.apply = [adapter](http::request_parser<http::string_body>& parser) {
    return adapter->ApplyBodyLimit(parser);
  };
  hooks.too_large = [adapter](const beast::RequestHeader& header) {
    return adapter->TooLarge(header);
  };
  beast_server_ = std::make_unique<demo::HttpServer>(
      server_options, [adapter](Request r) { return (*adapter)(std::move(r)); },
      std::move(hooks));
  ValueOrThrow(beast_server_->Start());
}

AdapterServer::~AdapterServer() {
  if (beast_server_) {
    beast_server_->Shutdown();
    beast_server_->Wait();
    beast_handler_->JoinStoreCalls();
  }
#if IDEM_DEMO_WITH_RESTINIO
  // As Demo's: the I/O threads stop, the store calls in flight end (they
  // post to the server's I/O context), then the server goes before its
  // adapter.
  if (restinio_server_) {
    restinio_server_->Shutdown();
    restinio_server_->Wait();
    restinio_handler_->JoinStoreCalls();
    restinio_server_.reset();
  }
#endif
}

#if IDEM_DEMO_WITH_RESTINIO
std::uint16_t AdapterServer::port() const {
  return beast_server_ ? beast_server_->port() : restinio_server_->port();
}

bool AdapterServer::store_calls_inline() const {
  return beast_handler_ ? beast_handler_->store_calls_inline()
                        : restinio_handler_->store_calls_inline();
}

std::size_t AdapterServer::store_threads() const {
  return beast_handler_ ? beast_handler_->store_threads()
                        : restinio_handler_->store_threads();
}
#else
std::uint16_t AdapterServer::port() const { return beast_server_->port(); }
bool AdapterServer::store_calls_inline() const {
  return beast_handler_->store_calls_inline();
}
std::size_t AdapterServer::store_threads() const {
  return beast_handler_->store_threads();
}
#endif

}  // namespace idem::testing
