// idem::restinio plugged in the other way than idem-demo does (which uses
// its sync_chain handler): wrapped route handlers of an express_router_t,
// synchronous and answering later from another thread, over real HTTP;
// and the check of RESTinio's request timeout against lock_wait.

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <restinio/all.hpp>

#include "http_test_util.h"
#include "idem/restinio/idempotent_handler.h"
#include "idem/testing/status_matchers.h"

namespace idem::testing {
namespace {

using Router = ::restinio::router::express_router_t<>;
using Traits = ::restinio::traits_t<::restinio::asio_timer_manager_t,
                                    ::restinio::null_logger_t, Router>;

restinio::IdempotentHandlerOptions Shared() {
  restinio::IdempotentHandlerOptions options;
  options.scope = ::idem::asio::SharedScope();
  return options;
}

std::shared_ptr<Guard> MakeGuard(GuardOptions options = {}) {
  GuardSetup setup;
  setup.store = OpenMemoryStore();
  setup.options = options;
  return ValueOrThrow(Guard::Create(std::move(setup)));
}

TEST(RestinioAdapterTest, WrappedRouteHandlersExecuteReplayAndAnswerLater) {
  auto guard = MakeGuard();
  boost::asio::io_context ioc;
  auto idem = ValueOrThrow(
      restinio::IdempotentHandler::Create(guard, ioc.get_executor(), Shared()));
  std::atomic<int> runs{0};
  auto router = std::make_unique<Router>();
  router->http_post("/sync", idem->Wrap([&runs](restinio::RequestHandle req) {
    ++runs;
    return idem::Response{
        201, {{"Content-Type", "text/plain"}}, "s:" + req->body()};
  }));
  // Answers from a thread of its own, after the RESTinio thread returned;
  // joined before the I/O context goes (a Responder's call posts to it).
  std::mutex later_mu;
  std::vector<std::thread> later;  // Under later_mu.
  router->http_post(
      "/later/:id",
      idem->Wrap(
          [&](restinio::RequestHandle req, restinio::Responder done) {
            ++runs;
            std::lock_guard lock(later_mu);
            later.emplace_back([req, done = std::move(done)]() mutable {
              done(idem::Response{
                  201, {{"Content-Type", "text/plain"}}, "l:" + req->body()});
            });
          },
          nullptr, "/later/{id}"));
  std::atomic<std::uint16_t> port{0};
  ::restinio::server_settings_t<Traits> settings;
  settings.port(0)
      .address("127.0.0.1")
      .acceptor_post_bind_hook([&port](boost::asio::ip::tcp::acceptor& a) {
        port = a.local_endpoint().port();
      })
      .incoming_http_msg_limits(
          ::restinio::incoming_http_msg_limits_t{}.max_body_size(
              idem->BodyLimit()))
      .request_handler(std::move(router));
  ASSERT_THAT(idem->CheckRequestTimeout(settings.handle_request_timeout()),
              IsOk());
  ::restinio::http_server_t<Traits> server(::restinio::external_io_context(ioc),
                                           std::move(settings));
  server.open_sync();
  auto work = boost::asio::make_work_guard(ioc);
  std::thread io([&ioc] { ioc.run(); });

  for (const char* target : {"/sync", "/later/7"}) {
    SCOPED_TRACE(target);
    // A key of its own per route: the same key on another route is a
    // reused key (422), as SEMANTICS says.
    const std::string key = std::string("k") + target;
    const Response first = SendOnce(port, Post(target, "x", key));
    EXPECT_EQ(first.result_int(), 201u);
    EXPECT_FALSE(IsReplay(first));
    const Response again = SendOnce(port, Post(target, "x", key));
    EXPECT_EQ(again.result_int(), 201u);
    EXPECT_TRUE(IsReplay(again));
    EXPECT_EQ(again.body(), first.body());
    EXPECT_EQ(HeaderOf(again, "Content-Type"), "text/plain");
  }
  // Not routed: RESTinio's own answer, 501, without idem.
  EXPECT_EQ(SendOnce(port, Get("/sync")).result_int(), 501u);
  EXPECT_EQ(ProblemMismatch(SendOnce(port, Post("/sync", "x", std::nullopt)),
                            400, "idempotency_key_missing"),
            "");
  // One key on each route: one run each.
  EXPECT_EQ(runs.load(), 2);
  EXPECT_EQ(guard->metrics().Get(Outcome::kReplayed), 2u);

  {
    std::lock_guard lock(later_mu);
    for (std::thread& t : later) t.join();
  }
  boost::asio::post(ioc, [&] {
    server.close_sync();
    work.reset();
    ioc.stop();
  });
  io.join();
}

TEST(RestinioAdapterTest, TheRequestTimeoutMustCoverLockWait) {
  GuardOptions options;
  options.lock_wait = std::chrono::seconds(5);
  auto guard = MakeGuard(options);
  boost::asio::io_context ioc;
  auto idem = ValueOrThrow(
      restinio::IdempotentHandler::Create(guard, ioc.get_executor(), Shared()));
  EXPECT_GE(idem->RequestTimeoutNeeded(), std::chrono::seconds(5));
  EXPECT_THAT(idem->CheckRequestTimeout(std::chrono::seconds(5)),
              HasErrorCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(idem->CheckRequestTimeout(std::chrono::seconds(6)), IsOk());
}

// RESTinio's Create, Protect and Wrap (Beast's: adapter_test.cc).
TEST(RestinioAdapterTest, CreateRejectsMissingParts) {
  auto guard = MakeGuard();
  boost::asio::io_context ioc;
  EXPECT_THAT(restinio::IdempotentHandler::Create(nullptr, ioc.get_executor(),
                                                  Shared()),
              HasErrorCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(restinio::IdempotentHandler::Create(
                  guard, boost::asio::any_io_executor(), Shared()),
              HasErrorCode(ErrorCode::kInvalidArgument));
  auto idem = ValueOrThrow(
      restinio::IdempotentHandler::Create(guard, ioc.get_executor(), Shared()));
  const restinio::Handler handler = [](restinio::RequestHandle) {
    return idem::Response{200, {}, ""};
  };
  EXPECT_THAT(
      idem->Protect(::restinio::http_method_post(), "no-slash", handler),
      HasErrorCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(
      idem->Protect(::restinio::http_method_post(), "/x", restinio::Handler()),
      HasErrorCode(ErrorCode::kInvalidArgument));
  auto bad = std::make_shared<GuardOptions>();
  bad->ttl = Duration::zero();
  EXPECT_THAT(idem->Protect(::restinio::http_method_post(), "/x", handler, bad),
              HasErrorCode(ErrorCode::kInvalidArgument));
  EXPECT_THROW(idem->Wrap(handler, bad), std::invalid_argument);
  EXPECT_THROW(idem->Wrap(restinio::Handler()), std::invalid_argument);
}

}  // namespace
}  // namespace idem::testing
