// The adapters over a store whose claims and completions are asynchronous
// (StoreInfo::async_calls, e.g. SQLite): both are the store's asynchronous
// calls made from the I/O thread, with no synchronous claim or completion
// (no store-call pool thread in between), and the answers are the same as
// on any store: the first request runs, its retry replays, another body is
// 422, a concurrent duplicate waits for the first and replays it. The real
// SQLite store runs the same path in the semantics and demo tests.

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http_test_util.h"
#include "idem/asio/guard_calls.h"
#include "idem/testing/status_matchers.h"
#include "support/threaded_async_store.h"
#include "support/wait_for.h"

namespace idem::testing {
namespace {

constexpr char kBody[] = R"({"n":1})";

// Counts its runs; each run waits, without a thread, until `release` is
// set (polling every 5 ms, at most a minute): the test orders what happens
// meanwhile by events.
beast::Handler Counting(std::atomic<int>& runs,
                        const std::atomic<bool>& release) {
  return [&runs, &release](Request req) -> boost::asio::awaitable<Response> {
    const int run = ++runs;
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
    for (int polls = 0; !release.load() && polls < 12000; ++polls) {
      timer.expires_after(std::chrono::milliseconds(5));
      co_await timer.async_wait(boost::asio::use_awaitable);
    }
    Response res(http::status::created, req.version());
    res.body() = "run " + std::to_string(run);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    co_return res;
  };
}

// `key` sent three times: the first runs the handler (201, `body`), the
// second replays it, the third with another body is refused (422).
void ExpectRunReplayedAndRefused(std::uint16_t port, const std::string& key,
                                 const std::string& body) {
  const Response first = SendOnce(port, Post("/x", kBody, key));
  EXPECT_EQ(first.result_int(), 201u);
  EXPECT_EQ(first.body(), body);
  const Response replay = SendOnce(port, Post("/x", kBody, key));
  EXPECT_EQ(replay.result_int(), 201u);
  EXPECT_EQ(replay.body(), body);
  EXPECT_TRUE(HasHeader(replay, "Idempotent-Replayed"));
  EXPECT_EQ(ProblemMismatch(SendOnce(port, Post("/x", R"({"n":2})", key)), 422,
                            "idempotency_key_reused"),
            "");
}

AdapterSetup Over(std::shared_ptr<Store> store) {
  AdapterSetup setup;
  setup.store = std::move(store);
  setup.routes = {{"POST", "/x"}};
  setup.options.lock_wait = std::chrono::seconds(30);
  return setup;
}

IDEM_HTTP_SERVER_SUITE(AsyncStoreTest);

TEST_P(AsyncStoreTest, ClaimsAndCompletionsAreTheStoresAsynchronousCalls) {
  std::atomic<int> runs{0};
  const std::atomic<bool> release{true};
  auto store = std::make_shared<ThreadedAsyncStore>();
  AdapterServer server(GetParam(), Counting(runs, release), Over(store));
  ExpectRunReplayedAndRefused(server.port(), "k1", "run 1");
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(store->async_claims.load(), 3);
  EXPECT_EQ(store->async_completes.load(), 1);
  EXPECT_EQ(store->claims.load(), 0);
  EXPECT_EQ(store->completes.load(), 0);
}

TEST_P(AsyncStoreTest, ADuplicateWaitsForTheFirstThroughAsynchronousClaims) {
  std::atomic<int> runs{0};
  std::atomic<bool> release{false};
  auto store = std::make_shared<ThreadedAsyncStore>();
  AdapterServer server(GetParam(), Counting(runs, release), Over(store));
  std::optional<Response> first, second;
  std::thread a(
      [&] { first = SendOnce(server.port(), Post("/x", kBody, "k")); });
  ASSERT_TRUE(WaitFor([&] { return runs.load() == 1; }));
  std::thread b(
      [&] { second = SendOnce(server.port(), Post("/x", kBody, "k")); });
  // The duplicate found the key in progress and polls it (lock_wait).
  ASSERT_TRUE(WaitFor([&] { return store->async_claims.load() >= 3; }));
  release = true;
  a.join();
  b.join();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->body(), "run 1");
  EXPECT_EQ(second->result_int(), 201u);
  EXPECT_EQ(second->body(), "run 1");
  EXPECT_TRUE(HasHeader(*second, "Idempotent-Replayed"));
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(store->claims.load(), 0);
  EXPECT_EQ(store->completes.load(), 0);
}

// A store that answers inside the call (a local cache's hit, a RocksDB
// claim that a record in memory blocks): the same answers, the coroutine
// goes on without waiting for a post, and the server still stops cleanly
// (nothing counted in flight for good).
TEST_P(AsyncStoreTest, AnswersMadeInsideTheCallAreServedTheSame) {
  std::atomic<int> runs{0};
  const std::atomic<bool> release{true};
  auto store = std::make_shared<ThreadedAsyncStore>();
  store->answer_inside = true;
  {
    AdapterServer server(GetParam(), Counting(runs, release), Over(store));
    ExpectRunReplayedAndRefused(server.port(), "k1", "run 1");
    // Answers from the store's thread and from inside, mixed.
    store->answer_inside = false;
    const Response second = SendOnce(server.port(), Post("/x", kBody, "k2"));
    EXPECT_EQ(second.body(), "run 2");
    store->answer_inside = true;
    const Response again = SendOnce(server.port(), Post("/x", kBody, "k2"));
    EXPECT_EQ(again.body(), "run 2");
    EXPECT_TRUE(HasHeader(again, "Idempotent-Replayed"));
  }  // The server's JoinPool returned: nothing was left in flight.
  EXPECT_EQ(runs.load(), 2);
  EXPECT_EQ(store->async_claims.load(), 5);
  EXPECT_EQ(store->async_completes.load(), 2);
  EXPECT_EQ(store->claims.load(), 0);
  EXPECT_EQ(store->completes.load(), 0);
}

// GuardCalls over `store`, with a guard of the default options.
std::unique_ptr<asio::GuardCalls> CallsOver(std::shared_ptr<Store> store) {
  GuardSetup setup;
  setup.store = std::move(store);
  auto guard = Guard::Create(std::move(setup));
  if (!guard) {
    ADD_FAILURE() << guard.error().ToString();
    return nullptr;
  }
  auto calls =
      asio::GuardCalls::Create(std::shared_ptr<Guard>(std::move(*guard)));
  if (!calls) {
    ADD_FAILURE() << calls.error().ToString();
    return nullptr;
  }
  return std::move(*calls);
}

// A decision's coroutine for the GuardCalls tests below: Decide on a POST
// with `key`, then `done` with the action, on the coroutine's own thread.
boost::asio::awaitable<void> DecideOnce(asio::GuardCalls& calls,
                                        std::string key,
                                        std::function<void(Action)> done) {
  const HeaderView headers[] = {{"Idempotency-Key", key}};
  RequestView view;
  view.method = "POST";
  view.target = "/x";
  view.headers = headers;
  view.body = kBody;
  Decision d = co_await calls.Decide(view, nullptr);
  done(d.action);
}

// GuardCalls alone: JoinPool, which a server calls before it destroys its
// I/O context, returns only once an asynchronous call in flight has posted
// its answer back, so the answer never reaches a destroyed context.
TEST(GuardCallsAsyncTest, JoinPoolWaitsForAnAsynchronousCallInFlight) {
  auto store = std::make_shared<ThreadedAsyncStore>();
  std::unique_ptr<asio::GuardCalls> calls = CallsOver(store);
  ASSERT_NE(calls, nullptr);
  ASSERT_TRUE(calls->store_calls_async());
  boost::asio::io_context io;
  std::optional<Action> decided;
  store->Hold();
  boost::asio::co_spawn(io,
                        DecideOnce(*calls, "k", [&](Action a) { decided = a; }),
                        boost::asio::detached);
  io.poll();  // Up to the claim, which the store holds.
  ASSERT_TRUE(WaitFor([&] { return store->waiting() == 1; }));
  EXPECT_FALSE(decided.has_value());
  std::atomic<bool> joined{false};
  std::thread joiner([&] {
    calls->JoinPool();
    joined = true;
  });
  EXPECT_FALSE(joined.load());  // The answer is not in yet.
  store->Let();
  joiner.join();
  // The answer was posted before JoinPool returned: the context runs it.
  io.restart();
  io.poll();
  ASSERT_TRUE(decided.has_value());
  EXPECT_EQ(*decided, Action::kExecute);
  EXPECT_EQ(store->claims.load(), 0);
}

// An answer made inside the store's call resumes the decision at once: the
// coroutine's first step (one handler of the context) runs it to its end,
// where an answer held back on the store's thread until that step is over
// takes a second one (the post back).
TEST(GuardCallsAsyncTest, AnAnswerInsideTheCallNeedsNoPostBack) {
  for (const bool inside : {true, false}) {
    SCOPED_TRACE(inside ? "inside" : "from the store's thread");
    auto store = std::make_shared<ThreadedAsyncStore>();
    store->answer_inside = inside;
    if (!inside) store->Hold();
    std::unique_ptr<asio::GuardCalls> calls = CallsOver(store);
    ASSERT_NE(calls, nullptr);
    boost::asio::io_context io;
    std::atomic<bool> decided{false};
    boost::asio::co_spawn(io,
                          DecideOnce(*calls, "k",
                                     [&](Action a) {
                                       EXPECT_EQ(a, Action::kExecute);
                                       decided = true;
                                     }),
                          boost::asio::detached);
    ASSERT_EQ(io.run_one(), 1u);
    EXPECT_EQ(decided.load(), inside);
    if (!inside) {
      // The store's thread answers and posts the decision back.
      store->Let();
      ASSERT_TRUE(WaitFor([&] {
        io.poll();
        return decided.load();
      }));
      // Out of its post before `io` goes.
      ASSERT_TRUE(WaitFor([&] { return store->served() == 1; }));
    }
    calls->JoinPool();
    EXPECT_EQ(store->async_claims.load(), 1);
  }
}

// The store's answer resumes the coroutine on its own executor, whichever
// it is: a strand of an I/O context and the context's own executor (the
// adapters' executors, which GuardCalls posts to without their type
// erasure), and any other (here a thread pool's, through the type-erased
// executor). On an I/O context, a context with nothing else to do does not
// run out while the store holds the answer (the suspended coroutine's
// work, which co_spawn keeps, not GuardCalls).
TEST(GuardCallsAsyncTest, AnswersResumeOnTheCoroutinesOwnExecutor) {
  auto store = std::make_shared<ThreadedAsyncStore>();
  std::unique_ptr<asio::GuardCalls> calls = CallsOver(store);
  ASSERT_NE(calls, nullptr);
  ASSERT_TRUE(calls->store_calls_async());
  for (const bool strand : {true, false}) {
    SCOPED_TRACE(strand ? "a strand" : "the I/O context's executor");
    boost::asio::io_context io;
    auto on_strand = boost::asio::make_strand(io);
    std::optional<Action> action;
    bool on_own_executor = false;
    const std::size_t served = store->served();
    store->Hold();
    auto done = [&](Action a) {
      action = a;
      on_own_executor = strand ? on_strand.running_in_this_thread()
                               : io.get_executor().running_in_this_thread();
    };
    if (strand) {
      boost::asio::co_spawn(on_strand, DecideOnce(*calls, "strand", done),
                            boost::asio::detached);
    } else {
      boost::asio::co_spawn(io, DecideOnce(*calls, "context", done),
                            boost::asio::detached);
    }
    io.poll();  // Up to the claim, which the store holds.
    ASSERT_TRUE(WaitFor([&] { return store->waiting() == 1; }));
    EXPECT_FALSE(io.stopped());  // The suspended coroutine is its work.
    store->Let();
    io.run();  // Returns once the answer came back and the coroutine ended.
    // The store's thread out of its post before `io` goes.
    ASSERT_TRUE(WaitFor([&] { return store->served() == served + 1; }));
    ASSERT_TRUE(action.has_value());
    EXPECT_EQ(*action, Action::kExecute);
    EXPECT_TRUE(on_own_executor);
  }
  {
    SCOPED_TRACE("a thread pool's executor");
    boost::asio::thread_pool pool(1);
    std::atomic<bool> decided{false};
    std::atomic<bool> on_pool{false};
    boost::asio::co_spawn(
        pool.get_executor(),
        DecideOnce(*calls, "pool",
                   [&](Action a) {
                     on_pool = pool.get_executor().running_in_this_thread() &&
                               a == Action::kExecute;
                     decided = true;
                   }),
        boost::asio::detached);
    ASSERT_TRUE(WaitFor([&] { return decided.load(); }));
    EXPECT_TRUE(on_pool.load());
    ASSERT_TRUE(WaitFor([&] { return store->served() == 3; }));
    pool.join();
  }
  calls->JoinPool();
  EXPECT_EQ(store->async_claims.load(), 3);
}

}  // namespace
}  // namespace idem::testing
