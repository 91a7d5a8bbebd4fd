// HttpServer: a small HTTP/1.1 server on Boost.Beast, the server side of
// idem-demo and of the adapter's end-to-end tests.
//
// It owns the sessions (one coroutine per connection, on its own strand):
// reading through the framing rules both adapters' servers share
// (idem/asio/request_framing.h: a refused request gets its 400 or 431
// problem), reading with a body limit, keep-alive, pipelining, timeouts,
// turning parse errors into 400 answers and handler exceptions into 500
// answers, and a graceful shutdown. What a request gets is the business of the
// handler it is given, which is where idem::beast::IdempotentHandler plugs in.
//
// Thread-safety: Start once; Shutdown and the accessors from any thread.

#ifndef IDEM_DEMO_HTTP_SERVER_H_
#define IDEM_DEMO_HTTP_SERVER_H_

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/parser.hpp>

#include "idem/beast/handler.h"
#include "idem/error.h"
#include "idem/log.h"

namespace idem::demo {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using idem::beast::Request;
using idem::beast::RequestHeader;
using idem::beast::Response;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  // 0 picks a free port; port() tells which.
  std::uint16_t port = 8080;
  // Threads running the I/O context. Default: 2.
  int threads = 2;
  // A connection with no request in this long is closed. Default: 60 s.
  std::chrono::seconds idle_timeout{60};
  // Reading one request (after its first byte) and writing one response
  // must each finish in this long. Default: 60 s.
  std::chrono::seconds io_timeout{60};
  // Body limit when no body_limit hook is given. Default: 8 MiB.
  std::uint64_t body_limit = std::uint64_t{8} << 20;
  // Most connections open at once; at the bound the server stops accepting
  // (new clients wait in the listen backlog) until one closes. 0: half the
  // soft RLIMIT_NOFILE, at most 10000 (the rest of the descriptors are the
  // store's). Default: 0.
  std::size_t max_connections = 0;
  // When accept fails for want of descriptors or memory (EMFILE, ENFILE,
  // ENOBUFS, ENOMEM), the server waits this long before it accepts again
  // instead of retrying at once. Default: 100 ms.
  std::chrono::milliseconds accept_backoff{100};
  // Where the server's warnings go (logged once per episode: accept
  // failing, the connection bound reached). Default: none.
  LogSink log;
};

// The default connection bound: half the soft RLIMIT_NOFILE, at most 10000
// (the rest of the descriptors are the store's).
std::size_t DefaultMaxConnections();

// What the server asks the layer that knows the routes.
struct BodyLimitHooks {
  // After the header is read: sets the parser's body limit; returns
  // http::error::body_limit when the declared length is already too large.
  std::function<boost::beast::error_code(
      http::request_parser<http::string_body>&)>
      apply;
  // The answer to a request whose body was over the limit.
  std::function<Response(const RequestHeader&)> too_large;
};

class HttpServer {
 public:
  // Called once per request on the connection's strand; may throw.
  using RequestHandler = std::function<asio::awaitable<Response>(Request)>;

  HttpServer(HttpServerOptions options, RequestHandler handler,
             BodyLimitHooks hooks = {});
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  // Shuts down and waits.
  ~HttpServer();

  // Binds, listens and starts the threads. kUnavailable naming the address
  // when it cannot bind.
  Status Start();

  // The address actually bound (after Start).
  const std::string& host() const { return options_.host; }
  std::uint16_t port() const { return port_; }

  // Stops accepting, closes every connection whose request has not reached
  // the handler (idle ones, and ones still sending a header or body), lets
  // requests in the handler finish and be answered (with Connection:
  // close), then lets the threads return. Idempotent.
  void Shutdown();

  // Blocks until every server thread has returned (after Shutdown).
  void Wait();

  // Connections open right now.
  std::size_t connections() const;
  // The connection bound in force (max_connections, or the derived default).
  std::size_t max_connections() const { return max_connections_; }

 private:
  struct Connection;

  asio::awaitable<void> Accept();
  asio::awaitable<void> Session(asio::ip::tcp::socket socket);
  bool Register(const std::shared_ptr<Connection>& connection);
  void Unregister(const std::shared_ptr<Connection>& connection);
  // A problem answer of the server itself (not of idem or the handler).
  static Response Answer(std::string_view target, unsigned version,
                         bool keep_alive, unsigned status,
                         std::string_view code, std::string detail);

  HttpServerOptions options_;
  RequestHandler handler_;
  BodyLimitHooks hooks_;
  asio::io_context ioc_;
  asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::vector<std::thread> threads_;
  std::atomic<bool> shutting_down_{false};
  std::size_t max_connections_ = 0;
  // Accepted sockets whose session has not ended: counted by the accept
  // loop itself, so the bound holds before the sessions register.
  std::atomic<std::size_t> open_sockets_{0};

  mutable std::mutex mu_;
  std::unordered_set<std::shared_ptr<Connection>> connections_;  // Under mu_.
  // Keeps the threads in run() until shutdown has drained every connection
  // (a request may be waiting on a thread outside the I/O context). Under mu_.
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>>
      work_;
};

}  // namespace idem::demo

#endif  // IDEM_DEMO_HTTP_SERVER_H_
