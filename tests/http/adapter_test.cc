// IdempotentHandler on its own: the three handler forms, route patterns and
// per-route options, store calls on the pool, fail-open, AsyncHandle with a
// plain callback.

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http_test_util.h"
#include "idem/beast/route.h"
#include "support/down_store.h"
#include "support/faulty_store.h"
#include "support/status_matchers.h"

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

// One server per handler form; each must behave the same.
class HandlerFormTest : public ::testing::TestWithParam<std::string> {
 protected:
  Handler MakeHandler() {
    const std::string form = GetParam();
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

  void TearDown() override {
    std::lock_guard lock(mu_);
    for (auto& t : threads_) t.join();
  }

  std::atomic<int> runs_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;  // Under mu_.
};

TEST_P(HandlerFormTest, ExecutesReplaysAndReleases) {
  AdapterServer server(OpenMemoryStore(), GuardOptions{}, MakeHandler(),
                       [](IdempotentHandler& h) {
                         ASSERT_THAT(h.Protect(http::verb::post, "/jobs/*"),
                                     IsOk());
                       });
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

INSTANTIATE_TEST_SUITE_P(Forms, HandlerFormTest,
                         ::testing::Values("sync", "coroutine", "callback"));

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

TEST(AdapterTest, PerRouteOptions) {
  std::atomic<int> runs{0};
  auto optional_key = std::make_shared<GuardOptions>();
  optional_key->key_required = false;
  optional_key->max_request_body = 10;
  AdapterServer server(
      OpenMemoryStore(), GuardOptions{}, CountingHandler(runs),
      [&](IdempotentHandler& h) {
        ASSERT_THAT(h.Protect(http::verb::post, "/strict"), IsOk());
        ASSERT_THAT(h.Protect(http::verb::put, "/loose/{id}", optional_key),
                    IsOk());
      });
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

TEST(AdapterTest, StoreCallsOnThePoolWithLockWait) {
  std::atomic<int> runs{0};
  GuardOptions options;
  options.lock_wait = std::chrono::seconds(10);
  beast::IdempotentHandlerOptions handler_options;
  handler_options.store_calls = beast::StoreCalls::kPool;
  handler_options.store_threads = 2;
  AdapterServer server(
      OpenMemoryStore(), options, CountingHandler(runs),
      [](IdempotentHandler& h) {
        ASSERT_THAT(h.Protect(http::verb::post, "/slow"), IsOk());
      },
      handler_options);
  EXPECT_FALSE(server.handler().store_calls_inline());
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

TEST(AdapterTest, InlineStoreCallsForTheMemoryStore) {
  std::atomic<int> runs{0};
  AdapterServer server(OpenMemoryStore(), GuardOptions{}, CountingHandler(runs),
                       [](IdempotentHandler&) {});
  EXPECT_TRUE(server.handler().store_calls_inline());
}

TEST(AdapterTest, FailOpenRunsUnprotected) {
  std::atomic<int> runs{0};
  GuardOptions options;
  options.on_store_error = StoreErrorPolicy::kFailOpen;
  AdapterServer server(std::make_shared<DownStore>(), options,
                       CountingHandler(runs), [](IdempotentHandler& h) {
                         ASSERT_THAT(h.Protect(http::verb::post, "/x"), IsOk());
                       });
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 1");
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 2");
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kFailOpen), 2u);
}

TEST(AdapterTest, AStoreCallThatThrowsOnThePoolFailsOnlyItsRequest) {
  // The exception crosses back from the pool thread to the request's
  // coroutine (the server answers 500, as for a handler that throws), and
  // the pool goes on serving.
  std::atomic<int> runs{0};
  auto store = std::make_shared<FaultyStore>(OpenMemoryStore());
  store->throw_on_claim = true;
  beast::IdempotentHandlerOptions handler_options;
  handler_options.store_calls = beast::StoreCalls::kPool;
  handler_options.store_threads = 1;
  AdapterServer server(
      store, GuardOptions{}, CountingHandler(runs),
      [](IdempotentHandler& h) {
        ASSERT_THAT(h.Protect(http::verb::post, "/jobs"), IsOk());
      },
      handler_options);
  ASSERT_FALSE(server.handler().store_calls_inline());
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

TEST(AdapterTest, ResponseOverMaxStoredIsSentNotStored) {
  std::atomic<int> runs{0};
  GuardOptions options;
  options.max_stored_response = 4;  // "run 1" is 5 bytes.
  AdapterServer server(OpenMemoryStore(), options, CountingHandler(runs),
                       [](IdempotentHandler& h) {
                         ASSERT_THAT(h.Protect(http::verb::post, "/x"), IsOk());
                       });
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 1");
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "k")).body(), "run 2");
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kNotStored), 2u);
}

TEST(AdapterTest, CompleteFailingLeavesTheKeyLockedUntilItsTimeout) {
  std::atomic<int> runs{0};
  auto clock = std::make_shared<ManualClock>();
  auto store = std::make_shared<FaultyStore>(OpenMemoryStore());
  store->fail_complete = ErrorCode::kUnavailable;
  GuardOptions options;
  options.lock_timeout = std::chrono::seconds(10);
  AdapterServer server(
      store, options, CountingHandler(runs),
      [](IdempotentHandler& h) {
        ASSERT_THAT(h.Protect(http::verb::post, "/x"), IsOk());
      },
      {}, clock);
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

TEST(AdapterTest, StaleCompleteAfterATakeover) {
  auto clock = std::make_shared<ManualClock>();
  std::atomic<int> runs{0};
  std::mutex mu;
  std::optional<Responder> parked;  // Run 1's, under mu.
  std::optional<Request> parked_request;
  GuardOptions options;
  options.lock_timeout = std::chrono::seconds(10);
  AdapterServer server(
      OpenMemoryStore(), options,
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
      [](IdempotentHandler& h) {
        ASSERT_THAT(h.Protect(http::verb::post, "/x"), IsOk());
      },
      {}, clock);
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

TEST(AdapterTest, AsyncHandleWithACallback) {
  GuardSetup setup;
  setup.store = OpenMemoryStore();
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<Guard> guard,
                       Guard::Create(std::move(setup)));
  auto handler = IdempotentHandler::Create(
      guard, [](Request req) { return Answer(req, 201, "made"); });
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

TEST(AdapterTest, CreateRejectsMissingParts) {
  GuardSetup setup;
  setup.store = OpenMemoryStore();
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<Guard> guard,
                       Guard::Create(std::move(setup)));
  EXPECT_THAT(IdempotentHandler::Create(
                  nullptr, [](Request r) { return Answer(r, 200, ""); }),
              HasErrorCode(ErrorCode::kInvalidArgument));
  EXPECT_THAT(IdempotentHandler::Create(guard, beast::Handler()),
              HasErrorCode(ErrorCode::kInvalidArgument));
  auto h = IdempotentHandler::Create(
      guard, [](Request r) { return Answer(r, 200, ""); });
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
