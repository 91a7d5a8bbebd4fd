#include "http_server_restinio.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>
#include <mutex>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <restinio/all.hpp>
#include <restinio/sync_chain/fixed_size.hpp>

#include "http_server.h"
#include "idem/beast/convert.h"
#include "idem/restinio/convert.h"
#include "idem/restinio/framing.h"

namespace idem::demo {
namespace {

using Chain = ::restinio::sync_chain::fixed_size_chain_t<2>;

// RESTinio's connection count limiter stops accepting at the bound but says
// nothing: this says it as HttpServer does, once per episode, from the
// connections' accepted and closed notices.
class ConnectionBoundLog {
 public:
  ConnectionBoundLog(std::size_t max_connections, LogSink log)
      : max_(max_connections), log_(std::move(log)) {}

  void state_changed(
      const ::restinio::connection_state::notice_t& notice) noexcept {
    const auto cause = notice.cause();
    const bool accepted =
        ::restinio::holds_alternative<::restinio::connection_state::accepted_t>(
            cause);
    const bool closed =
        ::restinio::holds_alternative<::restinio::connection_state::closed_t>(
            cause);
    if (!accepted && !closed) return;  // Upgraded: still counted.
    std::lock_guard lock(mu_);
    if (accepted) ++open_;
    if (closed && open_ > 0) --open_;
    try {
      if (!at_bound_ && open_ >= max_) {
        at_bound_ = true;
        if (log_) {
          log_(LogLevel::kWarning,
               "connection bound reached (max_connections=" +
                   std::to_string(max_) +
                   "); not accepting until a connection closes");
        }
      } else if (at_bound_ && open_ < max_) {
        at_bound_ = false;
        if (log_) log_(LogLevel::kInfo, "accepting connections again");
      }
    } catch (...) {
      // A log sink that throws loses the line, not the connection.
    }
  }

 private:
  const std::size_t max_;
  const LogSink log_;
  std::mutex mu_;
  std::size_t open_ = 0;   // Under mu_.
  bool at_bound_ = false;  // Under mu_.
};

struct Traits
    : ::restinio::traits_t<
          ::restinio::asio_timer_manager_t, ::restinio::null_logger_t, Chain,
          ::restinio::default_strand_t, idem::restinio::FramedSocket> {
  static constexpr bool use_connection_count_limiter = true;
  using connection_state_listener_t = ConnectionBoundLog;
};

}  // namespace

beast::Request ToBeastRequest(const ::restinio::request_t& request) {
  const auto& header = request.header();
  beast::Request out;
  out.method_string(header.method().c_str());
  out.target(header.request_target());
  out.version(header.http_major() * 10 + header.http_minor());
  for (const auto& field : header) out.insert(field.name(), field.value());
  out.keep_alive(header.should_keep_alive());
  out.body() = request.body();
  return out;
}

struct RestinioServer::Impl {
  std::unique_ptr<::restinio::http_server_t<Traits>> server;
};

boost::asio::awaitable<idem::Response> RestinioServer::Serve(
    DemoApp* app, idem::restinio::RequestHandle request) {
  co_return beast::FromBeast(co_await app->Handle(ToBeastRequest(*request)));
}

void RestinioServer::ServeTransfers(Transfers* transfers,
                                    idem::restinio::RequestHandle request,
                                    ClaimHandle& claim,
                                    idem::restinio::Responder done) {
  boost::asio::post(
      transfers->pool(), [transfers, converted = ToBeastRequest(*request),
                          &claim, done = std::move(done)]() mutable {
        try {
          done(beast::FromBeast(transfers->Serve(converted, claim)));
        } catch (...) {
          done.Fail(std::current_exception());
        }
      });
}

boost::asio::awaitable<idem::Response> RestinioServer::ServeRest(
    DemoApp* app, Transfers* transfers, idem::restinio::RequestHandle request) {
  beast::Request converted = ToBeastRequest(*request);
  if (transfers != nullptr && Transfers::Matches(converted)) {
    co_return beast::FromBeast(
        co_await transfers->Handle(std::move(converted)));
  }
  co_return beast::FromBeast(co_await app->Handle(std::move(converted)));
}

RestinioServer::RestinioServer(RestinioServerOptions options, DemoApp* app)
    : options_(std::move(options)) {
  // transfers_ is read per request: set_transfers comes after this.
  rest_ = [this, app](idem::restinio::RequestHandle request) {
    return ServeRest(app, transfers_, std::move(request));
  };
}

RestinioServer::RestinioServer(RestinioServerOptions options,
                               restinio::Handler rest)
    : options_(std::move(options)), rest_(std::move(rest)) {}

RestinioServer::~RestinioServer() {
  Shutdown();
  Wait();
  // Closed now that no I/O thread runs (see Shutdown).
  if (impl_ && impl_->server) impl_->server->close_sync();
  // The connections still waiting on I/O (keep-alive reads) are destroyed
  // with their handlers now, while the server they report to exists; then
  // the server, while the context's services exist (see IoContext).
  ioc_.shutdown();
  impl_.reset();
}

Status RestinioServer::Start(restinio::IdempotentHandler* idem) {
  // Whatever idem did not answer: rest_ (/transfers or DemoApp, or a
  // test's handler), as a coroutine on the I/O context, answering from
  // there.
  auto rest = [&handler = rest_,
               &ioc = ioc_](const idem::restinio::RequestHandle& request) {
    boost::asio::co_spawn(
        ioc, handler(request),
        [request](std::exception_ptr error, idem::Response response) {
          if (!error) {
            idem::restinio::Send(*request, response);
            return;
          }
          idem::restinio::SendProblem(*request, 500, "internal_error",
                                      "The request handler failed.",
                                      /*close=*/true);
        });
    return ::restinio::request_accepted();
  };
  idem::restinio::ChainHandlerFn idem_first =
      idem ? idem->ChainHandler()
           : idem::restinio::ChainHandlerFn(
                 [](const idem::restinio::RequestHandle&) {
                   return ::restinio::request_not_handled();
                 });
  // Every request passes here first: Shutdown waits for the ones in flight.
  auto first = [this, idem_first = std::move(idem_first)](
                   const idem::restinio::RequestHandle& request) {
    // A request the framing rules refused, as its stand-in: answered here.
    if (idem::restinio::AnswerFramingRejection(*request)) {
      return ::restinio::request_accepted();
    }
    in_flight_.Add(request);
    return idem_first(request);
  };
  const std::size_t max_connections = options_.max_connections > 0
                                          ? options_.max_connections
                                          : DefaultMaxConnections();
  ::restinio::server_settings_t<Traits> settings;
  settings.port(options_.port)
      .address(options_.host)
      .max_parallel_connections(max_connections)
      .connection_state_listener(
          std::make_shared<ConnectionBoundLog>(max_connections, options_.log))
      .incoming_http_msg_limits(
          ::restinio::incoming_http_msg_limits_t{}.max_body_size(
              options_.body_limit))
      .handle_request_timeout(options_.handle_request_timeout)
      .read_next_http_message_timelimit(options_.io_timeout)
      .write_http_response_timelimit(options_.io_timeout)
      .acceptor_post_bind_hook(
          [this](boost::asio::ip::tcp::acceptor& acceptor) {
            port_.store(acceptor.local_endpoint().port());
            listen_fd_.store(acceptor.native_handle());
          })
      .request_handler(std::move(first), std::move(rest));
  if (idem) {
    IDEM_RETURN_IF_ERROR(
        idem->CheckRequestTimeout(options_.handle_request_timeout));
  }
  impl_ = std::make_unique<Impl>();
  impl_->server = std::make_unique<::restinio::http_server_t<Traits>>(
      ::restinio::external_io_context(ioc_), std::move(settings));
  try {
    // The I/O threads are not running yet: opened on this thread.
    impl_->server->open_sync();
  } catch (const std::exception& e) {
    impl_->server.reset();
    return MakeError(ErrorCode::kUnavailable,
                     "cannot listen on " + options_.host + ":" +
                         std::to_string(options_.port) + ": " + e.what());
  }
  work_.emplace(ioc_.get_executor());
  for (int i = 0; i < options_.threads; ++i) {
    threads_.emplace_back([this] { ioc_.run(); });
  }
  return {};
}

void RestinioServer::Shutdown() {
  if (shut_down_.exchange(true)) return;
  if (!impl_ || !impl_->server) return;
  if (threads_.empty()) {
    impl_->server->close_sync();
  } else {
    // RESTinio closes its acceptor on a strand of its own, but runs its
    // accept loop (the next async_accept, started by the previous accept's
    // completion) on the I/O context's plain executor: with two I/O threads
    // or more, close_async's close races that async_accept on the
    // acceptor's state (ThreadSanitizer saw it). shutdown(2) of the
    // listening socket stops the accepting without touching Asio's state:
    // new connections are refused and the pending accept completes with an
    // error, which ends RESTinio's loop. The acceptor itself is closed
    // after the I/O threads have returned (the destructor).
    const int fd = listen_fd_.load();
    if (fd < 0 || ::shutdown(fd, SHUT_RDWR) != 0) {
      std::promise<void> closed;
      impl_->server->close_async(
          [&closed] { closed.set_value(); },
          [&closed](std::exception_ptr) { closed.set_value(); });
      closed.get_future().wait();
    }
    // The requests in a handler finish: stopped halfway, a handler would
    // have done part of its work and left its key released (a retry would
    // run it again). Nothing signals a request's end but its handle going,
    // so this looks every few milliseconds, for at most the time RESTinio
    // gives a request.
    const auto deadline =
        std::chrono::steady_clock::now() + options_.handle_request_timeout;
    while (!in_flight_.Idle() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Their responses were handed to their connections' executors: one
    // more turn of the I/O context starts those writes before it stops.
    std::promise<void> turned;
    boost::asio::post(ioc_, [&turned] { turned.set_value(); });
    turned.get_future().wait();
  }
  work_.reset();
  ioc_.stop();
}

void RestinioServer::InFlight::Add(
    const idem::restinio::RequestHandle& request) {
  std::lock_guard lock(mu_);
  if (requests_.size() >= prune_at_) {
    Prune();
    // Amortised: the next prune once as many again have come in.
    prune_at_ = std::max<std::size_t>(64, 2 * requests_.size());
  }
  requests_.push_back(request);
}

bool RestinioServer::InFlight::Idle() {
  std::lock_guard lock(mu_);
  Prune();
  return requests_.empty();
}

void RestinioServer::InFlight::Prune() {
  std::erase_if(requests_, [](const auto& r) { return r.expired(); });
}

void RestinioServer::Wait() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace idem::demo
