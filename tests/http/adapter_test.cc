// Each adapter (HttpServers(): Beast's and RESTinio's IdempotentHandler)
// around a test's own handler: the three handler forms, a dropped
// Responder, route patterns and per-route options, store calls on the
// pool, fail-open, the response classification's unstored ends, the scope
// option (required; SharedScope() or a resolver). Beast's
// own API (AsyncHandle with a plain callback, Create's checks) at the end.

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http_test_util.h"
#include "idem/beast/route.h"
#include "idem/testing/status_matchers.h"
#include "support/down_store.h"
#include "support/faulty_store.h"

namespace idem::testing {
namespace {

namespace asio = boost::asio;
using beast::Handler;
using beast::IdempotentHandler;
using beast::Responder;

constexpr char kBody[] = R"({"n":1})";

Response Answer(const Request& req, unsigned status, std::string body) {
  Response res(static_cast<http::status>(status), req.version());
  res.set(http::field::content_type, "text/plain");
  res.set("X-Private", "not replayed");
  res.body() = std::move(body);
  res.keep_alive(req.keep_alive());
  res.prepare_payload();
  return res;
}

// One server per adapter and handler form; each must behave the same.
class HandlerFormTest : public ::testing::TestWithParam<
                            std::tuple<demo::HttpFramework, std::string>> {
 protected:
  Handler MakeHandler() {
    const std::string form = std::get<1>(GetParam());
    if (form == "sync") {
      return [this](Request req) {
        ++runs_;
        if (req.target().ends_with("throw")) throw std::runtime_error("boom");
        return Answer(req, 201, "run " + std::to_string(runs_.load()));
      };
    }
    if (form == "coroutine") {
      return [this](Request req) -> asio::awaitable<Response> {
        ++runs_;
        asio::steady_timer timer(co_await asio::this_coro::executor);
        timer.expires_after(std::chrono::milliseconds(5));
        co_await timer.async_wait(asio::use_awaitable);
        if (req.target().ends_with("throw")) throw std::runtime_error("boom");
        co_return Answer(req, 201, "run " + std::to_string(runs_.load()));
      };
    }
    // Completion handler, completed from a foreign thread.
    return [this](Request req, Responder done) {
      ++runs_;
      std::lock_guard lock(mu_);
      threads_.emplace_back([req = std::move(req), done = std::move(done),
                             n = runs_.load()]() mutable {
        if (req.target().ends_with("throw")) {
          done.Fail(std::make_exception_ptr(std::runtime_error("boom")));
        } else {
          done(Answer(req, 201, "run " + std::to_string(n)));
        }
      });
    };
  }

  // The handler's threads end before the server (a member, destroyed after
  // TearDown) and its I/O context go: a Responder's call posts to it.
  void TearDown() override {
    std::lock_guard lock(mu_);
    for (auto& t : threads_) t.join();
  }

  std::optional<AdapterServer> server_;
  std::atomic<int> runs_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;  // Under mu_.
};

TEST_P(HandlerFormTest, ExecutesReplaysAndReleases) {
  AdapterServer& server =
      server_.emplace(std::get<0>(GetParam()), MakeHandler(),
                      AdapterSetup{.routes = {{"POST", "/jobs/*"}}});
  const Response first = SendOnce(server.port(), Post("/jobs/a", kBody, "k1"));
  EXPECT_EQ(first.result_int(), 201u);
  EXPECT_EQ(first.body(), "run 1");
  EXPECT_EQ(HeaderOf(first, "X-Private"), "not replayed");
  const Response replay = SendOnce(server.port(), Post("/jobs/a", kBody, "k1"));
  EXPECT_TRUE(IsReplay(replay));
  EXPECT_EQ(replay.body(), "run 1");
  EXPECT_EQ(HeaderOf(replay, "Content-Type"), "text/plain");
  EXPECT_FALSE(HasHeader(replay, "X-Private"));
  EXPECT_EQ(runs_.load(), 1);

  // A failing handler releases the key: the retry runs it again.
  EXPECT_EQ(
      SendOnce(server.port(), Post("/jobs/throw", kBody, "k2")).result_int(),
      500u);
  EXPECT_EQ(
      SendOnce(server.port(), Post("/jobs/throw", kBody, "k2")).result_int(),
      500u);
  EXPECT_EQ(runs_.load(), 3);
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kReleased), 2u);

  // Not protected: straight through, every time, key or not.
  EXPECT_EQ(SendOnce(server.port(), Post("/other", kBody, "k1")).body(),
            "run 4");
  EXPECT_EQ(SendOnce(server.port(), Post("/other", kBody, "k1")).body(),
            "run 5");
}

INSTANTIATE_TEST_SUITE_P(
    Forms, HandlerFormTest,
    ::testing::Combine(::testing::ValuesIn(HttpServers()),
                       ::testing::Values("sync", "coroutine", "callback")),
    [](const auto& info) {
      return HttpServerName(std::get<0>(info.param)) + "_" +
             std::get<1>(info.param);
    });

// The adapters around a test's own handler.
IDEM_HTTP_SERVER_SUITE(AdapterTest);

TEST_P(AdapterTest, ADroppedResponderGets500AndReleasesTheKey) {
  std::atomic<int> runs{0};
  AdapterServer server(GetParam(),
                       [&runs](Request, Responder done) {
                         ++runs;
                         // Destroyed uncalled.
                         Responder lost = std::move(done);
                       },
                       {.routes = {{"POST", "/x"}}});
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ProblemMismatch(SendOnce(server.port(), Post("/x", kBody, "k")),
                              500, "internal_error"),
              "");
  }
  EXPECT_EQ(runs.load(), 2);
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kReleased), 2u);
}

Handler CountingHandler(std::atomic<int>& runs) {
  return [&runs](Request req) -> asio::awaitable<Response> {
    ++runs;
    if (req.target().find("slow") != boost::beast::string_view::npos) {
      asio::steady_timer timer(co_await asio::this_coro::executor);
      timer.expires_after(std::chrono::milliseconds(300));
      co_await timer.async_wait(asio::use_awaitable);
    }
    co_return Answer(req, 200, "run " + std::to_string(runs.load()));
  };
}

TEST_P(AdapterTest, PerRouteOptions) {
  std::atomic<int> runs{0};
  auto optional_key = std::make_shared<GuardOptions>();
  optional_key->key_required = false;
  optional_key->max_request_body = 10;
  AdapterServer server(
      GetParam(), CountingHandler(runs),
      {.routes = {{"POST", "/strict"}, {"PUT", "/loose/{id}", optional_key}}});
  const auto port = server.port();
  // Key required by the guard's defaults.
  EXPECT_EQ(
      ProblemMismatch(SendOnce(port, Post("/strict", kBody, std::nullopt)), 400,
                      "idempotency_key_missing"),
      "");
  // Key optional: without one the request passes through, every time, and
  // its body is not bounded by the route's limit.
  Request loose = Post("/loose/1", std::string(100, 'x'), std::nullopt);
  loose.method(http::verb::put);
  EXPECT_EQ(SendOnce(port, loose).body(), "run 1");
  EXPECT_EQ(SendOnce(port, loose).body(), "run 2");
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kUnprotected), 2u);
  // With a key it is protected, with the route's 10-byte body limit.
  loose.set("Idempotency-Key", "k");
  EXPECT_EQ(ProblemMismatch(SendOnce(port, loose), 413, "request_too_large"),
            "");
  loose.body() = "small";
  EXPECT_EQ(SendOnce(port, loose).body(), "run 3");
  EXPECT_TRUE(IsReplay(SendOnce(port, loose)));
  EXPECT_EQ(runs.load(), 3);
}

TEST_P(AdapterTest, StoreCallsOnThePoolWithLockWait) {
  std::atomic<int> runs{0};
  AdapterSetup setup;
  setup.options.lock_wait = std::chrono::seconds(10);
  setup.calls.store_calls = beast::StoreCalls::kPool;
  setup.calls.store_threads = 2;
  setup.routes = {{"POST", "/slow"}};
  AdapterServer server(GetParam(), CountingHandler(runs), setup);
  EXPECT_FALSE(server.store_calls_inline());
  std::vector<std::thread> threads;
  std::vector<Response> answers(8);
  for (std::size_t i = 0; i < answers.size(); ++i) {
    threads.emplace_back([&, i] {
      answers[i] = SendOnce(server.port(), Post("/slow", kBody, "k"));
    });
  }
  for (auto& t : threads) t.join();
  int replays = 0;
  for (const Response& a : answers) {
    EXPECT_EQ(a.result_int(), 200u);
    EXPECT_EQ(a.body(), "run 1");
    replays += IsReplay(a) ? 1 : 0;
  }
  EXPECT_EQ(replays, 7);
  EXPECT_EQ(runs.load(), 1);
}

TEST_P(AdapterTest, InlineStoreCallsForTheMemoryStore) {
  std::atomic<int> runs{0};
  AdapterServer server(GetParam(), CountingHandler(runs));
  EXPECT_TRUE(server.store_calls_inline());
  EXPECT_EQ(server.store_threads(), 0u);
}

// SEMANTICS.md, "scope": no adapter starts without an explicit choice of
// whose key a request's key is.
TEST_P(AdapterTest, CreateWithoutAScopeIsRefusedNamingScope) {
  const Status created =
      CreateAdapter(GetParam(), {.scope = TestScope::kUnset});
  ASSERT_THAT(created, HasErrorCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(created.error().message(), ::testing::HasSubstr("`scope`"));
  EXPECT_THAT(created.error().message(),
              ::testing::HasSubstr("idem::asio::SharedScope()"));
  EXPECT_THAT(CreateAdapter(GetParam(), {.scope = TestScope::kShared}), IsOk());
  EXPECT_THAT(CreateAdapter(GetParam(), {.scope = TestScope::kCaller}), IsOk());
}

// SharedScope(): one namespace for every caller, so bob, sending alice's
// key and body, gets alice's stored response. What it is for, and why it
// must be chosen.
TEST_P(AdapterTest, SharedScopeSharesOneKeyNamespaceAcrossCallers) {
  std::atomic<int> runs{0};
  AdapterServer server(
      GetParam(), CountingHandler(runs),
      {.routes = {{"POST", "/x"}}, .scope = TestScope::kShared});
  const Response alice = SendOnce(
      server.port(), Post("/x", kBody, "k", {{kCallerHeader, "alice"}}));
  const Response bob =
      SendOnce(server.port(), Post("/x", kBody, "k", {{kCallerHeader, "bob"}}));
  EXPECT_EQ(alice.body(), "run 1");
  EXPECT_FALSE(IsReplay(alice));
  EXPECT_TRUE(IsReplay(bob));
  EXPECT_EQ(bob.body(), "run 1");
  EXPECT_EQ(runs.load(), 1);
}

// A resolver: each caller's keys are its own. The same key and body run the
// handler once per caller, and each replays only its own response.
TEST_P(AdapterTest, AScopeResolverSeparatesCallers) {
  std::atomic<int> runs{0};
  AdapterServer server(
      GetParam(), CountingHandler(runs),
      {.routes = {{"POST", "/x"}}, .scope = TestScope::kCaller});
  auto send = [&](const char* caller) {
    return SendOnce(server.port(),
                    Post("/x", kBody, "k", {{kCallerHeader, caller}}));
  };
  const Response alice = send("alice");
  const Response bob = send("bob");
  EXPECT_EQ(alice.body(), "run 1");
  EXPECT_FALSE(IsReplay(bob));
  EXPECT_EQ(bob.body(), "run 2");
  const Response alice_again = send("alice");
  const Response bob_again = send("bob");
  EXPECT_TRUE(IsReplay(alice_again));
  EXPECT_EQ(alice_again.body(), "run 1");
  EXPECT_TRUE(IsReplay(bob_again));
  EXPECT_EQ(bob_again.body(), "run 2");
  // No caller: anonymous, the shared scope "" of neither.
  const Response anonymous = SendOnce(server.port(), Post("/x", kBody, "k"));
  EXPECT_FALSE(IsReplay(anonymous));
  EXPECT_EQ(anonymous.body(), "run 3");
  EXPECT_EQ(runs.load(), 3);
}

TEST_P(AdapterTest, FailOpenRunsUnprotected) {
  std::atomic<int> runs{0};
  AdapterSetup setup;
  setup.store = std::make_shared<DownStore>();
  setup.options.on_store_error = StoreErrorPolicy::kFailOpen;
  setup.routes = {{"POST", "/x"}};
  AdapterServer server(GetParam(), CountingHandler(runs), setup);
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 1");
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 2");
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kFailOpen), 2u);
}

TEST_P(AdapterTest, AStoreCallThatThrowsOnThePoolFailsOnlyItsRequest) {
  // The exception crosses back from the pool thread to the request's
  // coroutine (the server answers 500, as for a handler that throws), and
  // the pool goes on serving.
  std::atomic<int> runs{0};
  auto store = std::make_shared<FaultyStore>(OpenMemoryStore());
  store->throw_on_claim = true;
  AdapterSetup setup;
  setup.store = store;
  setup.calls.store_calls = beast::StoreCalls::kPool;
  setup.calls.store_threads = 1;
  setup.routes = {{"POST", "/jobs"}};
  AdapterServer server(GetParam(), CountingHandler(runs), setup);
  ASSERT_FALSE(server.store_calls_inline());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(SendOnce(server.port(), Post("/jobs", kBody, "k")).result_int(),
              500u);
  }
  EXPECT_EQ(runs.load(), 0);
  store->throw_on_claim = false;
  EXPECT_EQ(SendOnce(server.port(), Post("/jobs", kBody, "k")).body(), "run 1");
  EXPECT_TRUE(IsReplay(SendOnce(server.port(), Post("/jobs", kBody, "k"))));
  EXPECT_EQ(runs.load(), 1);
}

TEST_P(AdapterTest, ResponseOverMaxStoredIsSentNotStored) {
  std::atomic<int> runs{0};
  AdapterSetup setup;
  setup.options.max_stored_response = 4;  // "run 1" is 5 bytes.
  setup.routes = {{"POST", "/x"}};
  AdapterServer server(GetParam(), CountingHandler(runs), setup);
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 1");
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 2");
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kNotStored), 2u);
}

TEST_P(AdapterTest, CompleteFailingLeavesTheKeyLockedUntilItsTimeout) {
  std::atomic<int> runs{0};
  auto clock = std::make_shared<ManualClock>();
  auto store = std::make_shared<FaultyStore>(OpenMemoryStore());
  store->fail_complete = ErrorCode::kUnavailable;
  AdapterSetup setup;
  setup.store = store;
  setup.clock = clock;
  setup.options.lock_timeout = std::chrono::seconds(10);
  setup.routes = {{"POST", "/x"}};
  AdapterServer server(GetParam(), CountingHandler(runs), setup);
  // Sent, though not stored.
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 1");
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kStoreFailed), 1u);
  EXPECT_EQ(ProblemMismatch(SendOnce(server.port(), Post("/x", kBody, "k")),
                            409, "idempotency_request_in_progress"),
            "");
  // After the lock timeout the key is taken over and the handler runs again.
  store->fail_complete = std::nullopt;
  clock->Advance(std::chrono::seconds(11));
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 2");
  EXPECT_TRUE(IsReplay(SendOnce(server.port(), Post("/x", kBody, "k"))));
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kTakeover), 1u);
  EXPECT_EQ(runs.load(), 2);
}

TEST_P(AdapterTest, StaleCompleteAfterATakeover) {
  auto clock = std::make_shared<ManualClock>();
  std::atomic<int> runs{0};
  std::mutex mu;
  std::optional<Responder> parked;  // Run 1's, under mu.
  std::optional<Request> parked_request;
  AdapterSetup setup;
  setup.clock = clock;
  setup.options.lock_timeout = std::chrono::seconds(10);
  setup.routes = {{"POST", "/x"}};
  AdapterServer server(
      GetParam(),
      [&](Request req, Responder done) {
        const int n = ++runs;
        if (n == 1) {
          std::lock_guard lock(mu);
          parked.emplace(std::move(done));
          parked_request.emplace(std::move(req));
          return;
        }
        done(Answer(req, 200, "run " + std::to_string(n)));
      },
      setup);
  std::optional<Response> first;
  std::thread slow(
      [&] { first = SendOnce(server.port(), Post("/x", kBody, "k")); });
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return parked.has_value();
  }));
  // Run 1's lock times out; a retry takes the key over and completes first.
  clock->Advance(std::chrono::seconds(11));
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 2");
  {
    std::lock_guard lock(mu);
    (*parked)(Answer(*parked_request, 200, "run 1"));
  }
  slow.join();
  // Run 1's answer is sent but not stored: retries get run 2's.
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->body(), "run 1");
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kStaleComplete), 1u);
  const Response retry = SendOnce(server.port(), Post("/x", kBody, "k"));
  EXPECT_TRUE(IsReplay(retry));
  EXPECT_EQ(retry.body(), "run 2");
}

// Beast's own API: AsyncHandle has no RESTinio counterpart.
TEST(BeastAdapterTest, AsyncHandleWithACallback) {
  GuardSetup setup;
  setup.store = OpenMemoryStore();
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<Guard> guard,
                       Guard::Create(std::move(setup)));
  beast::IdempotentHandlerOptions options;
  options.scope = ::idem::asio::SharedScope();
  auto handler = IdempotentHandler::Create(
      guard, [](Request req) { return Answer(req, 201, "made"); }, options);
  ASSERT_THAT(handler, IsOk());
  ASSERT_THAT((*handler)->Protect(http::verb::post, "/x"), IsOk());
  asio::io_context ioc;
  std::vector<Response> got;
  for (int i = 0; i < 2; ++i) {
    (*handler)->AsyncHandle(ioc.get_executor(), Post("/x", kBody, "k"),
                            [&](std::exception_ptr e, Response res) {
                              EXPECT_FALSE(e);
                              got.push_back(std::move(res));
                            });
    ioc.run();
    ioc.restart();
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].body(), "made");
  EXPECT_FALSE(IsReplay(got[0]));
  EXPECT_TRUE(IsReplay(got[1]));
  EXPECT_EQ(got[1][http::field::content_length], "4");
}

// Beast's Create and Protect; RESTinio's are in restinio_adapter_test.cc.
TEST(BeastAdapterTest, CreateRejectsMissingParts) {
  GuardSetup setup;
  setup.store = OpenMemoryStore();
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<Guard> guard,
                       Guard::Create(std::move(setup)));
  beast::IdempotentHandlerOptions shared;
  shared.scope = ::idem::asio::SharedScope();
  EXPECT_THAT(
      IdempotentHandler::Create(
          nullptr, [](Request r) { return Answer(r, 200, ""); }, shared),
      HasErrorCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(IdempotentHandler::Create(guard, beast::Handler(), shared),
              HasErrorCode(ErrorCode::kInvalidArgument));
  auto h = IdempotentHandler::Create(
      guard, [](Request r) { return Answer(r, 200, ""); }, shared);
  ASSERT_THAT(h, IsOk());
  EXPECT_THAT((*h)->Protect(http::verb::post, "no-slash"),
              HasErrorCode(ErrorCode::kInvalidArgument));
  auto bad = std::make_shared<GuardOptions>();
  bad->ttl = Duration::zero();
  EXPECT_THAT((*h)->Protect(http::verb::post, "/x", bad),
              HasErrorCode(ErrorCode::kInvalidArgument));
}

}  // namespace
}  // namespace idem::testing
