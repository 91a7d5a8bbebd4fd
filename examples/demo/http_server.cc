#include "http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <exception>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "idem/asio/framed_stream.h"
#include "idem/beast/convert.h"
#include "idem/beast/request_checks.h"
#include "idem/problem.h"

namespace idem::demo {
namespace {

using asio::ip::tcp;
using boost::beast::error_code;

// The framing rules bound the header section first (431); this is the
// parser's own backstop, never reached by a request they passed.
constexpr std::uint32_t kHeaderLimit =
    2 * ::idem::asio::FramingLimits{}.header_bytes;
// After an error answer the server stops reading requests but drains what the
// client is still sending (up to this much, for this long) before closing, so
// that closing a socket with unread data does not reset the connection and
// destroy the answer on its way.
constexpr std::size_t kDrainLimit = std::size_t{16} << 20;
constexpr std::chrono::seconds kDrainTime{2};

bool IsParseError(const error_code& ec) {
  static const auto& category =
      make_error_code(http::error::bad_method).category();
  return ec.category() == category && ec != http::error::end_of_stream &&
         ec != http::error::partial_message && ec != http::error::need_more &&
         ec != http::error::need_buffer;
}

// Accept errors that mean "no descriptor or memory now": retrying at once
// would fail again at once (the listening socket stays readable).
bool IsResourceError(const error_code& ec) {
  return ec == asio::error::no_descriptors || ec.value() == ENFILE ||
         ec == asio::error::no_buffer_space || ec == asio::error::no_memory;
}

constexpr std::size_t kMaxDefaultConnections = 10'000;

}  // namespace

std::size_t DefaultMaxConnections() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 ||
      limit.rlim_cur == RLIM_INFINITY) {
    return kMaxDefaultConnections;
  }
  return std::clamp<std::size_t>(static_cast<std::size_t>(limit.rlim_cur / 2),
                                 1, kMaxDefaultConnections);
}

struct HttpServer::Connection {
  // The session's strand.
  asio::any_io_executor executor;
  // Set while the session lives; read and written only on its strand.
  boost::beast::tcp_stream* stream = nullptr;
  // The request has reached the handler and its answer is not yet written:
  // Shutdown lets it finish. Only on the strand.
  bool busy = false;
};

HttpServer::HttpServer(HttpServerOptions options, RequestHandler handler,
                       BodyLimitHooks hooks)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      hooks_(std::move(hooks)),
      acceptor_(asio::make_strand(ioc_)),
      max_connections_(options_.max_connections > 0 ? options_.max_connections
                                                    : DefaultMaxConnections()) {
}

HttpServer::~HttpServer() {
  Shutdown();
  Wait();
}

Status HttpServer::Start() {
  error_code ec;
  const auto address = asio::ip::make_address(options_.host, ec);
  if (ec) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "not an IP address: '" + options_.host + "'");
  }
  const tcp::endpoint endpoint(address, options_.port);
  auto fail = [&](std::string_view what) {
    return MakeError(ErrorCode::kUnavailable,
                     std::string(what) + " " + options_.host + ":" +
                         std::to_string(options_.port) + ": " + ec.message());
  };
  if (acceptor_.open(endpoint.protocol(), ec)) return fail("cannot open");
  if (acceptor_.set_option(tcp::acceptor::reuse_address(true), ec)) {
    return fail("cannot set SO_REUSEADDR on");
  }
  if (acceptor_.bind(endpoint, ec)) return fail("cannot bind");
  if (acceptor_.listen(asio::socket_base::max_listen_connections, ec)) {
    return fail("cannot listen on");
  }
  port_ = acceptor_.local_endpoint().port();
  work_.emplace(ioc_.get_executor());
  asio::co_spawn(acceptor_.get_executor(), Accept(), asio::detached);
  const int n = options_.threads > 0 ? options_.threads : 1;
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { ioc_.run(); });
  return {};
}

void HttpServer::Shutdown() {
  if (shutting_down_.exchange(true)) return;
  asio::post(acceptor_.get_executor(), [this] {
    error_code ignored;
    acceptor_.close(ignored);
  });
  std::lock_guard lock(mu_);
  for (const auto& connection : connections_) {
    // Connections whose request has not reached the handler (idle, or
    // still sending) are closed now; busy ones close after their answer.
    asio::post(connection->executor, [connection] {
      if (connection->stream != nullptr && !connection->busy) {
        connection->stream->cancel();
      }
    });
  }
  if (connections_.empty()) work_.reset();
}

void HttpServer::Wait() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::size_t HttpServer::connections() const {
  std::lock_guard lock(mu_);
  return connections_.size();
}

bool HttpServer::Register(const std::shared_ptr<Connection>& connection) {
  std::lock_guard lock(mu_);
  if (shutting_down_.load()) return false;
  connections_.insert(connection);
  return true;
}

void HttpServer::Unregister(const std::shared_ptr<Connection>& connection) {
  std::lock_guard lock(mu_);
  connection->stream = nullptr;
  connections_.erase(connection);
  if (shutting_down_.load() && connections_.empty()) work_.reset();
}

asio::awaitable<void> HttpServer::Accept() {
  asio::steady_timer pause(acceptor_.get_executor());
  auto log = [this](LogLevel level, const std::string& message) {
    if (options_.log) options_.log(level, message);
  };
  std::uint64_t failed = 0;  // Resource failures in the current episode.
  bool at_bound = false;
  for (;;) {
    // At the bound the server stops accepting; new clients wait in the
    // listen backlog. Polled: a connection that closes needs no wake-up.
    if (open_sockets_.load() >= max_connections_) {
      if (!at_bound) {
        at_bound = true;
        log(LogLevel::kWarning,
            "connection bound reached (max_connections=" +
                std::to_string(max_connections_) +
                "); not accepting until a connection closes");
      }
      pause.expires_after(options_.accept_backoff);
      error_code ignored;
      co_await pause.async_wait(
          asio::redirect_error(asio::use_awaitable, ignored));
      if (shutting_down_.load() || !acceptor_.is_open()) co_return;
      continue;
    }
    if (at_bound) {
      at_bound = false;
      log(LogLevel::kInfo, "accepting connections again");
    }
    error_code ec;
    tcp::socket socket = co_await acceptor_.async_accept(
        asio::make_strand(ioc_), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (shutting_down_.load() || !acceptor_.is_open()) co_return;
      if (IsResourceError(ec)) {
        // Retrying at once would burn a core: back off, and say so once.
        if (failed++ == 0) {
          log(LogLevel::kError,
              "accept failed (" + ec.message() + "); retrying every " +
                  std::to_string(options_.accept_backoff.count()) +
                  " ms until descriptors are free (" +
                  std::to_string(connections()) + " connections open)");
        }
        pause.expires_after(options_.accept_backoff);
        error_code ignored;
        co_await pause.async_wait(
            asio::redirect_error(asio::use_awaitable, ignored));
      }
      continue;  // A failed accept (a client that gave up) ends no server.
    }
    if (failed > 0) {
      log(LogLevel::kInfo, "accepting again after " + std::to_string(failed) +
                               " failed accepts");
      failed = 0;
    }
    socket.set_option(tcp::no_delay(true), ec);
    open_sockets_.fetch_add(1);
    auto executor = socket.get_executor();
    asio::co_spawn(executor, Session(std::move(socket)), asio::detached);
  }
}

Response HttpServer::Answer(std::string_view target, unsigned version,
                            bool keep_alive, unsigned status,
                            std::string_view code, std::string detail) {
  Problem problem;
  problem.status = static_cast<int>(status);
  problem.code = code;
  problem.detail = std::move(detail);
  problem.instance = target.substr(0, target.find('?'));
  return beast::ToBeast(MakeProblemResponse(problem), version, keep_alive);
}

asio::awaitable<void> HttpServer::Session(tcp::socket socket) {
  auto connection = std::make_shared<Connection>();
  connection->executor = socket.get_executor();
  // Requests are read through the framing rules both adapters' servers
  // hold them to (idem/asio/request_framing.h); writes and the drain go to
  // the stream itself.
  ::idem::asio::FramedStream<boost::beast::tcp_stream> framed(
      std::move(socket));
  boost::beast::tcp_stream& stream = framed.next_layer();
  connection->stream = &stream;
  struct Closed {
    std::atomic<std::size_t>& open;
    ~Closed() { open.fetch_sub(1); }
  } closed{open_sockets_};
  if (!Register(connection)) {
    connection->stream = nullptr;
    co_return;
  }
  const auto token = asio::use_awaitable;
  boost::beast::flat_buffer buffer;
  error_code ec;
  bool drain = false;  // Whether unread request bytes may remain.
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(options_.body_limit);
    stream.expires_after(options_.idle_timeout);
    co_await http::async_read_header(framed, buffer, parser,
                                     asio::redirect_error(token, ec));
    std::optional<Response> response;
    std::optional<beast::HeaderRejection> rejected;
    if (!ec) {
      rejected = beast::CheckRequestHeader(parser.get());
    }
    if (!ec && !rejected) {
      if (hooks_.apply) ec = hooks_.apply(parser);
      if (!ec && !parser.is_done()) {
        stream.expires_after(options_.io_timeout);
        // A client that asked may wait for this before sending the body
        // (curl waits a second for bodies over 1 KiB).
        const auto expect = parser.get()[http::field::expect];
        if (boost::beast::iequals(expect, "100-continue")) {
          http::response<http::empty_body> go_on(http::status::continue_,
                                                 parser.get().version());
          co_await http::async_write(stream, go_on,
                                     asio::redirect_error(token, ec));
        }
      }
      if (!ec && !parser.is_done()) {
        const beast::HeaderFieldIdentities header_fields =
            beast::HeaderFieldIds(parser.get());
        co_await http::async_read(framed, buffer, parser,
                                  asio::redirect_error(token, ec));
        // Keys and scopes come from the header section, never a trailer.
        if (!ec) beast::EraseTrailerFields(parser.get(), header_fields);
      }
    }
    // The request line, when the parser got that far (instance of a 400).
    const std::string_view parsed_target = beast::ToStd(parser.get().target());
    if (ec == ::idem::asio::FramingError::kRefused && framed.rejection()) {
      // Refused by the framing rules before the parser saw the request.
      const ::idem::asio::FramingRejection& refused = *framed.rejection();
      response = Answer(refused.target, 11, false,
                        static_cast<unsigned>(refused.status), refused.code,
                        refused.detail);
      drain = true;
    } else if (rejected) {
      // Framing we cannot trust (or ambiguous credentials): the body is not
      // read, the connection closes after the answer.
      const RequestHeader& header = parser.get().base();
      response = Answer(parsed_target, header.version(), false, 400,
                        rejected->code, rejected->detail);
      drain = true;
    } else if (ec == http::error::body_limit) {
      const RequestHeader& header = parser.get().base();
      response = hooks_.too_large
                     ? hooks_.too_large(header)
                     : Answer(beast::ToStd(header.target()), header.version(),
                              false, 413, "request_too_large",
                              "The request body is larger than this server "
                              "accepts.");
      response->keep_alive(false);
      drain = true;
    } else if (IsParseError(ec)) {
      // The parser rejected the request: answer rather than drop, so the
      // client learns why; the stream's framing is lost, so close after.
      response =
          Answer(parsed_target, 11, false, 400, "bad_request",
                 "The request is not valid HTTP/1.1 (" + ec.message() + ").");
      response->keep_alive(false);
      drain = true;
    } else if (ec) {
      break;  // Closed by the client, timed out or cancelled by Shutdown.
    } else if (shutting_down_.load()) {
      break;  // Read while shutting down: it never reaches the handler.
    } else {
      connection->busy = true;  // From here Shutdown lets it finish.
      stream.expires_never();   // The handler takes the time it takes.
      Request request = parser.release();
      const unsigned version = request.version();
      const bool keep_alive = request.keep_alive();
      const std::string target(beast::ToStd(request.target()));
      bool failed = false;
      try {
        response = co_await handler_(std::move(request));
      } catch (...) {
        // Whatever the handler threw, std::exception or not, ends in the
        // server's own error handling (idem has already released the key).
        failed = true;
      }
      if (failed) {
        // A generic answer that says nothing about the failure.
        response = Answer(target, version, keep_alive, 500, "internal_error",
                          "The server failed to handle the request.");
      }
    }
    if (shutting_down_.load()) response->keep_alive(false);
    stream.expires_after(options_.io_timeout);
    co_await http::async_write(stream, *response,
                               asio::redirect_error(token, ec));
    connection->busy = false;
    if (ec || !response->keep_alive() || shutting_down_.load()) break;
  }
  error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  if (drain) {
    std::array<char, 16 * 1024> discard;
    std::size_t drained = 0;
    stream.expires_after(kDrainTime);
    while (drained < kDrainLimit) {
      const std::size_t n = co_await stream.async_read_some(
          asio::buffer(discard), asio::redirect_error(token, ec));
      if (ec) break;
      drained += n;
    }
  }
  stream.socket().close(ignored);
  Unregister(connection);
}

}  // namespace idem::demo
