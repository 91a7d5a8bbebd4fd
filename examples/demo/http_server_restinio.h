// RestinioServer: idem-demo's server on RESTinio 0.6 (`--http restinio`),
// beside HttpServer (Beast, the default). The same endpoints and flags; the
// request handling is a RESTinio handler chain: idem::restinio's chain
// handler for the protected routes, then DemoApp for everything else.
//
// DemoApp speaks Beast messages; this server converts at its edge (a
// RESTinio request to a Beast request, DemoApp's Beast response to an
// idem::Response), so DemoApp's routes stay one set of functions.
//
// Requests are read through idem::restinio::FramedSocket, so the framing
// rules are HttpServer's (idem/asio/request_framing.h) and a request they
// refuse gets the same 400 or 431 problem. Differences from HttpServer,
// which are RESTinio 0.6's (SEMANTICS.md, "Adapters"): a request its own
// parser still rejects (a method http-parser does not know, a body over
// max_body_size, a chunked body whose framing breaks after its header)
// gets no answer, the connection is closed; no 100 Continue; Content-Length: 0
// on a 204 or 304. Shutdown stops accepting, lets the requests in a handler
// finish (at most handle_request_timeout; their responses are stored, then
// handed to RESTinio to send), and only then closes the open connections:
// RESTinio offers no way to close an idle keep-alive connection sooner.
//
// Thread-safety: Start once; Shutdown and the accessors from any thread.

#ifndef IDEM_DEMO_HTTP_SERVER_RESTINIO_H_
#define IDEM_DEMO_HTTP_SERVER_RESTINIO_H_

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "demo_app.h"
#include "idem/error.h"
#include "idem/log.h"
#include "idem/restinio/idempotent_handler.h"
#include "transfers.h"

namespace idem::demo {

struct RestinioServerOptions {
  std::string host = "127.0.0.1";
  // 0 picks a free port; port() tells which.
  std::uint16_t port = 8080;
  // Threads running the I/O context. Default: 2.
  int threads = 2;
  // Most connections open at once (RESTinio's connection count limiter).
  // 0: half the soft RLIMIT_NOFILE, at most 10000. Default: 0.
  std::size_t max_connections = 0;
  // RESTinio's max_body_size: idem::restinio::IdempotentHandler::BodyLimit()
  // when idem protects routes. Default: 8 MiB.
  std::uint64_t body_limit = std::uint64_t{8} << 20;
  // RESTinio's handle_request_timeout: how long a request may take from its
  // last byte read to its answer. Default: 60 s.
  std::chrono::milliseconds handle_request_timeout{60'000};
  // RESTinio's read_next_http_message_timelimit (an idle keep-alive
  // connection) and write_http_response_timelimit. Default: 60 s.
  std::chrono::seconds io_timeout{60};
  // Where the server's warnings go (the connection bound reached, once per
  // episode, as HttpServer's). Default: none.
  LogSink log;
};

// A RESTinio request as the Beast request DemoApp reads: method, target,
// version, every header field in order, keep-alive, body.
beast::Request ToBeastRequest(const ::restinio::request_t& request);

class RestinioServer {
 public:
  // `app` must outlive the server.
  RestinioServer(RestinioServerOptions options, DemoApp* app);
  // Whatever idem does not answer goes to `rest` instead of DemoApp (tests
  // serve their own handler so; set_transfers has no effect).
  RestinioServer(RestinioServerOptions options, restinio::Handler rest);
  RestinioServer(const RestinioServer&) = delete;
  RestinioServer& operator=(const RestinioServer&) = delete;
  // Shuts down and waits.
  ~RestinioServer();

  // RestinioServerOptions::body_limit, before Start.
  void set_body_limit(std::uint64_t limit) { options_.body_limit = limit; }

  // POST /transfers and GET /transfers/count (Transfers::Matches) go to
  // `transfers` (which must outlive the server) rather than DemoApp, as on
  // the Beast server. Before Start. Default: none.
  void set_transfers(Transfers* transfers) { transfers_ = transfers; }

  // The I/O context the server runs on (the adapter's executor).
  boost::asio::io_context& io_context() { return ioc_; }

  // Binds, listens and starts the threads, with `idem` (which must outlive
  // the server) in front of DemoApp; null: every request goes to DemoApp
  // (the benchmark baseline). kUnavailable naming the address when it cannot
  // bind; kInvalidArgument when handle_request_timeout does not cover idem's
  // waits (IdempotentHandler::CheckRequestTimeout).
  Status Start(restinio::IdempotentHandler* idem);

  const std::string& host() const { return options_.host; }
  std::uint16_t port() const { return port_.load(); }

  // Stops accepting, waits for the requests in a handler to finish (at
  // most handle_request_timeout), then closes every connection; the
  // threads return. Blocks for that wait. Idempotent.
  void Shutdown();
  // Blocks until every server thread has returned (after Shutdown).
  void Wait();

  // DemoApp behind RESTinio: the protected routes' handler.
  static boost::asio::awaitable<idem::Response> Serve(
      DemoApp* app, idem::restinio::RequestHandle request);
  // POST /transfers behind RESTinio, the claim-taking completion form: the
  // blocking SQL on the transfers' pool, answered through `done`.
  static void ServeTransfers(Transfers* transfers,
                             idem::restinio::RequestHandle request,
                             ClaimHandle& claim,
                             idem::restinio::Responder done);

 private:
  struct Impl;

  // The requests handed to the chain whose handling has not ended (a
  // handler still holds their handle), for Shutdown's wait.
  class InFlight {
   public:
    void Add(const idem::restinio::RequestHandle& request);
    // True when none of them is alive.
    bool Idle();

   private:
    // Drops the ended ones. Under mu_.
    void Prune();

    std::mutex mu_;
    std::vector<std::weak_ptr<::restinio::request_t>> requests_;  // Under mu_.
    std::size_t prune_at_ = 64;                                   // Under mu_.
  };

  // /transfers (when set) or DemoApp: rest_ of the DemoApp constructor.
  static boost::asio::awaitable<idem::Response> ServeRest(
      DemoApp* app, Transfers* transfers,
      idem::restinio::RequestHandle request);

  // An io_context whose pending handlers can be destroyed before the
  // server: a keep-alive connection's pending read holds the connection,
  // whose destructor tells the server's connection-count limiter, so those
  // handlers must go while the server (and its limiter) still exists, and
  // the server's sockets must be destroyed while the context's services
  // still exist. shutdown() does the first and keeps the services.
  class IoContext : public boost::asio::io_context {
   public:
    using boost::asio::execution_context::shutdown;
  };

  RestinioServerOptions options_;
  Transfers* transfers_ = nullptr;
  // The chain's handler for whatever idem did not answer.
  restinio::Handler rest_;
  IoContext ioc_;
  std::optional<
      boost::asio::executor_work_guard<boost::asio::io_context::executor_type>>
      work_;
  std::unique_ptr<Impl> impl_;
  std::atomic<std::uint16_t> port_{0};
  // The listening socket, for Shutdown; -1 before Start.
  std::atomic<int> listen_fd_{-1};
  std::vector<std::thread> threads_;
  std::atomic<bool> shut_down_{false};
  InFlight in_flight_;
};

}  // namespace idem::demo

#endif  // IDEM_DEMO_HTTP_SERVER_RESTINIO_H_
