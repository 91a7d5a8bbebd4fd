// Helpers for the HTTP end-to-end tests: a blocking HTTP/1.1 client over a
// real socket (every read and write has a deadline, so a bug fails a test
// instead of hanging it), request builders, and servers on 127.0.0.1:0 —
// the demo itself in-process, or the adapter around a test's own handler.
//
// Thread-safety: a TestClient belongs to one thread; servers are as
// HttpServer.

#ifndef IDEM_TESTS_HTTP_HTTP_TEST_UTIL_H_
#define IDEM_TESTS_HTTP_HTTP_TEST_UTIL_H_

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <nlohmann/json.hpp>

#include "demo.h"
#include "http_server.h"
#include "idem/beast/idempotent_handler.h"
#include "support/wait_for.h"

namespace idem::testing {

namespace http = boost::beast::http;
using beast::Request;
using beast::Response;

// Generous: the tests share two cores with other builds and also run under
// ASan and TSan.
inline constexpr std::chrono::seconds kIoTimeout{60};

class TestClient {
 public:
  explicit TestClient(std::uint16_t port);

  // Writes `request` and reads its response. Throws boost::system_error on a
  // socket error, a timeout or a malformed response.
  Response Send(const Request& request);

  // Raw bytes, for pipelining and malformed requests.
  void Write(std::string_view bytes);
  // Reads one response.
  Response Read();
  // True when the server closed the connection (reads EOF or a reset)
  // before sending anything more.
  bool ReadsEof();
  // Closes the socket at once.
  void Close();

 private:
  boost::asio::io_context ioc_;
  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
};

struct Headers : std::vector<std::pair<std::string, std::string>> {
  using vector::vector;
};

// A POST with an optional Idempotency-Key (sent verbatim) and extra headers.
Request Post(std::string target, std::string body,
             std::optional<std::string> key, const Headers& headers = {});
Request Get(std::string target);
// The request as bytes on the wire (Content-Length set).
std::string Serialize(Request request);

// A request the server's HTTP parser rejects (a control byte in a header
// value) before the Guard sees it: 400 bad_request, and the connection
// closes.
inline constexpr char kRequestTheParserRejects[] =
    "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\x01"
    "b\r\nContent-Length: 0\r\n\r\n";

// Opens a connection, sends, reads and closes.
Response SendOnce(std::uint16_t port, const Request& request);

nlohmann::json Json(const Response& response);
std::string HeaderOf(const Response& response, std::string_view name);
bool HasHeader(const Response& response, std::string_view name);
bool IsReplay(const Response& response);
// Checks status, content type, the problem members and `code`; returns a
// description of what is wrong, or "" when it is that problem. `instance`
// must be non-empty, and present unless code is bad_request (the parser's
// rejection, which has no path).
std::string ProblemMismatch(const Response& response, unsigned status,
                            std::string_view code);

// The servers the HTTP conformance suite runs against: idem-demo on each of
// its HTTP frameworks, each with its idem adapter. A third adapter is one
// line here (and its server in the demo).
inline std::vector<demo::HttpFramework> HttpServers() {
  return {
    demo::HttpFramework::kBeast,
#if IDEM_DEMO_WITH_RESTINIO
        demo::HttpFramework::kRestinio,
#endif
  };
}
// "Beast", "Restinio": test name suffixes, and idem-demo's --http value in
// lower case (HttpFlag).
std::string HttpServerName(demo::HttpFramework http);
std::string HttpFlag(demo::HttpFramework http);
inline std::string HttpServerParamName(
    const ::testing::TestParamInfo<demo::HttpFramework>& info) {
  return HttpServerName(info.param);
}

// A suite over every server of HttpServers(): TEST_P(Fixture, ...) with
// INSTANTIATE_TEST_SUITE_P(Servers, Fixture, ::testing::ValuesIn(
// HttpServers()), HttpServerParamName).
class HttpServerTest : public ::testing::TestWithParam<demo::HttpFramework> {
 protected:
  // `options` on this test's server.
  demo::DemoOptions On(demo::DemoOptions options = {}) const {
    options.http = GetParam();
    return options;
  }
  bool restinio() const { return GetParam() == demo::HttpFramework::kRestinio; }
};

// Declares `Fixture`, an HttpServerTest, and runs its TEST_Ps on every
// server of HttpServers(), each named by HttpServerParamName.
#define IDEM_HTTP_SERVER_SUITE(Fixture)                                      \
  class Fixture : public ::idem::testing::HttpServerTest {};                 \
  INSTANTIATE_TEST_SUITE_P(                                                  \
      Servers, Fixture, ::testing::ValuesIn(::idem::testing::HttpServers()), \
      ::idem::testing::HttpServerParamName)

// idem-demo in this process, on 127.0.0.1:0.
class DemoServer {
 public:
  // The memory store unless `store` is given.
  explicit DemoServer(demo::DemoOptions options = {},
                      std::shared_ptr<Store> store = nullptr);
  ~DemoServer();

  std::uint16_t port() const { return demo_->port(); }
  demo::Demo& demo() { return *demo_; }
  std::uint64_t handler_runs() const { return demo_->app().handler_runs(); }
  std::uint64_t Count(Outcome outcome) {
    return demo_->guard()->metrics().Get(outcome);
  }

 private:
  std::unique_ptr<demo::Demo> demo_;
};

// A route AdapterServer's adapter protects.
struct ProtectedRoute {
  // "POST", "PUT", "PATCH", "DELETE" or "GET".
  std::string method = "POST";
  // idem/route.h: "/orders/{id}", "/jobs/*".
  std::string pattern;
  // Null: the guard's own.
  std::shared_ptr<const GuardOptions> options = nullptr;
};

// The scope option AdapterServer gives its adapter.
enum class TestScope {
  kShared,  // ::idem::asio::SharedScope(): every caller, one namespace.
  kCaller,  // The kCallerHeader's value; anonymous without the header.
  kUnset,   // No choice: the adapter's Create refuses it.
};
inline constexpr char kCallerHeader[] = "X-Caller";

// What AdapterServer runs: a Guard over `store` (the memory store when
// null) with `options` on `clock`, the adapter's store-call options and
// scope, and the routes it protects.
struct AdapterSetup {
  std::shared_ptr<Store> store;
  GuardOptions options;
  std::vector<ProtectedRoute> routes;
  ::idem::asio::GuardCallOptions calls;
  std::shared_ptr<Clock> clock;
  TestScope scope = TestScope::kShared;
};

// The adapter's Create alone (over a Guard on the memory store), for its
// checks: what it returns with `setup`'s options.
Status CreateAdapter(demo::HttpFramework http, const AdapterSetup& setup);

// A test's own handler behind one adapter (the factory of the conformance
// suite, over HttpServers()), served on 127.0.0.1:0: Beast's
// IdempotentHandler in demo::HttpServer, or RESTinio's chain handler in
// demo::RestinioServer, where the handler's Beast messages are converted
// at the edge (the demo's own way). Requests to routes that are not
// protected go to the handler too.
class AdapterServer {
 public:
  AdapterServer(demo::HttpFramework http, beast::Handler handler,
                AdapterSetup setup = {});
  ~AdapterServer();

  std::uint16_t port() const;
  Guard& guard() { return *guard_; }
  bool store_calls_inline() const;
  std::size_t store_threads() const;

 private:
  std::shared_ptr<Guard> guard_;
  std::unique_ptr<beast::IdempotentHandler> beast_handler_;
  std::unique_ptr<demo::HttpServer> beast_server_;
  // shared_ptr: complete types only in a build with RESTinio.
  std::shared_ptr<demo::RestinioServer> restinio_server_;
  std::shared_ptr<restinio::IdempotentHandler> restinio_handler_;
};

std::shared_ptr<Store> OpenMemoryStore(std::string_view uri = "memory:");

}  // namespace idem::testing

#endif  // IDEM_TESTS_HTTP_HTTP_TEST_UTIL_H_
