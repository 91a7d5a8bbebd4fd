// The adapter's store-call pool under a store that hangs: every store call's
// deadline includes its wait in the pool's queue. A claim that no pool
// thread started within the queue timeout is answered 503 without calling
// the store; a Finish that did not start in time is not made (the response
// is sent, the record stays in progress); the pool is as large as the store
// says it serves at once; a claim a local cache answers needs no pool
// thread at all.

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http_test_util.h"
#include "idem/store/forwarding_store.h"
#include "idem/store/local_cache.h"
#include "idem/testing/status_matchers.h"

namespace idem::testing {
namespace {

namespace asio = boost::asio;

constexpr char kBody[] = R"({"n":1})";

// Forwards to a memory store; while `hold` is set, Claim and Complete wait
// (at most a minute, so a broken test ends) until it is cleared, as calls
// to a frozen database server do.
class GateStore final : public ForwardingStore {
 public:
  explicit GateStore(std::size_t max_concurrent_calls = 0)
      : ForwardingStore(OpenMemoryStore()),
        max_concurrent_calls_(max_concurrent_calls) {}

  void Hold() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      hold_ = false;
    }
    cv_.notify_all();
  }
  int waiting() const { return waiting_.load(); }

  std::atomic<int> claims{0};
  std::atomic<int> completes{0};

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override {
    ++claims;
    Gate();
    return ForwardingStore::Claim(id, fp, now, ttl, lock_timeout);
  }
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const idem::Response& response) override {
    ++completes;
    Gate();
    return ForwardingStore::Complete(id, token, response);
  }
  // Through Complete, gated and counted, as Store's default does.
  Result<bool> CompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const idem::Response> response) override {
    return Complete(id, token, *response);
  }
  StoreInfo Info() const override {
    return StoreInfo{.name = "gate",
                     .durable = true,
                     .max_concurrent_calls = max_concurrent_calls_};
  }

 private:
  void Gate() {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.wait_for(lock, std::chrono::minutes(1), [this] { return !hold_; });
    --waiting_;
  }

  const std::size_t max_concurrent_calls_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool hold_ = false;  // Under mu_.
  std::atomic<int> waiting_{0};
};

// Counts its runs. On /slow it waits, without a thread, until `release` is
// set (polling every 5 ms, at most a minute): a test orders what happens
// meanwhile by events, not by how long a handler takes on a loaded machine.
beast::Handler CountingHandler(std::atomic<int>& runs,
                               const std::atomic<bool>* release = nullptr) {
  return [&runs, release](Request req) -> asio::awaitable<Response> {
    const int run = ++runs;
    if (release != nullptr &&
        req.target().find("slow") != boost::beast::string_view::npos) {
      asio::steady_timer timer(co_await asio::this_coro::executor);
      for (int polls = 0; !release->load() && polls < 12000; ++polls) {
        timer.expires_after(std::chrono::milliseconds(5));
        co_await timer.async_wait(asio::use_awaitable);
      }
    }
    Response res(http::status::ok, req.version());
    res.body() = "run " + std::to_string(run);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    co_return res;
  };
}

// /x and /slow protected over `store`, store calls on the pool.
AdapterSetup OnThePool(std::shared_ptr<Store> store) {
  AdapterSetup setup;
  setup.store = std::move(store);
  setup.routes = {{"POST", "/x"}, {"POST", "/slow"}};
  setup.calls.store_calls = beast::StoreCalls::kPool;
  return setup;
}

// One pool thread, a 200 ms queue timeout.
AdapterSetup OneThread(std::shared_ptr<Store> store) {
  AdapterSetup setup = OnThePool(std::move(store));
  setup.calls.store_threads = 1;
  setup.calls.store_queue_timeout = std::chrono::milliseconds(200);
  return setup;
}

// On each adapter (HttpServers()): the pool is idem::asio's, shared.
IDEM_HTTP_SERVER_SUITE(StoreQueueTest);

TEST_P(StoreQueueTest, AClaimNotStartedInTimeAnswers503WithoutTheStore) {
  std::atomic<int> runs{0};
  auto store = std::make_shared<GateStore>();
  AdapterServer server(GetParam(), CountingHandler(runs), OneThread(store));
  store->Hold();
  std::optional<Response> first;
  std::thread holder(
      [&] { first = SendOnce(server.port(), Post("/x", kBody, "held")); });
  // The pool's only thread is now inside the store.
  ASSERT_TRUE(WaitFor([&] { return store->waiting() == 1; }));

  // Answered while the store still hangs: the deadline covered the queue.
  std::vector<Response> queued(3);
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < queued.size(); ++i) {
    clients.emplace_back([&, i] {
      queued[i] = SendOnce(server.port(),
                           Post("/x", kBody, "queued-" + std::to_string(i)));
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(store->waiting(), 1);
  for (const Response& r : queued) {
    EXPECT_EQ(ProblemMismatch(r, 503, "idempotency_store_unavailable"), "");
    EXPECT_TRUE(HasHeader(r, "Retry-After"));
  }
  EXPECT_EQ(store->claims.load(), 1);  // The queued claims never reached it.
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kStoreError), 3u);
  EXPECT_EQ(runs.load(), 0);

  store->Open();
  holder.join();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->result_int(), 200u);
  // The store is back: the next claim is made and executed.
  EXPECT_EQ(SendOnce(server.port(), Post("/x", kBody, "queued-0")).body(),
            "run 2");
}

TEST_P(StoreQueueTest, AFinishNotStartedInTimeIsSentAndLeavesTheRecordLocked) {
  std::atomic<int> runs{0};
  std::atomic<bool> release{false};
  auto store = std::make_shared<GateStore>();
  AdapterServer server(GetParam(), CountingHandler(runs, &release),
                       OneThread(store));
  std::optional<Response> slow;
  std::thread a(
      [&] { slow = SendOnce(server.port(), Post("/slow", kBody, "a")); });
  // Claimed; its handler waits for `release`. Meanwhile another claim takes
  // the pool's only thread and hangs in the store.
  ASSERT_TRUE(WaitFor([&] { return runs.load() == 1; }));
  store->Hold();
  std::optional<Response> blocked;
  std::thread b(
      [&] { blocked = SendOnce(server.port(), Post("/x", kBody, "b")); });
  ASSERT_TRUE(WaitFor([&] { return store->waiting() == 1; }));
  release = true;  // Now "a" finishes, and its Finish waits behind "b".
  a.join();
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->result_int(), 200u);
  EXPECT_EQ(slow->body(), "run 1");
  EXPECT_EQ(store->completes.load(), 0);  // Its Finish was never made.
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kStoreFailed), 1u);
  store->Open();
  b.join();
  // The record is still in progress until its lock times out.
  EXPECT_EQ(ProblemMismatch(SendOnce(server.port(), Post("/slow", kBody, "a")),
                            409, "idempotency_request_in_progress"),
            "");
  EXPECT_EQ(runs.load(), 2);  // "a" once, "b" once.
}

TEST_P(StoreQueueTest, ACachedReplayIsAnsweredWhileThePoolIsStuck) {
  std::atomic<int> runs{0};
  auto gate = std::make_unique<GateStore>();
  GateStore* store = gate.get();
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Store> cached,
      LocalCacheStore::Wrap(std::move(gate), {.max_records = 16}));
  AdapterSetup setup = OneThread(std::shared_ptr<Store>(std::move(cached)));
  setup.calls.store_calls = beast::StoreCalls::kAuto;
  AdapterServer server(GetParam(), CountingHandler(runs), setup);
  const Response done = SendOnce(server.port(), Post("/x", kBody, "done"));
  ASSERT_EQ(done.result_int(), 200u);
  ASSERT_EQ(done.body(), "run 1");

  store->Hold();
  std::optional<Response> first;
  std::thread holder(
      [&] { first = SendOnce(server.port(), Post("/x", kBody, "held")); });
  // The pool's only thread is now inside the store.
  ASSERT_TRUE(WaitFor([&] { return store->waiting() == 1; }));
  const int claims = store->claims.load();

  // The replay needs no store call: answered on the I/O thread, not after
  // the queue timeout (a 503).
  const Response replay = SendOnce(server.port(), Post("/x", kBody, "done"));
  EXPECT_EQ(replay.result_int(), 200u);
  EXPECT_EQ(replay.body(), "run 1");
  EXPECT_TRUE(HasHeader(replay, "Idempotent-Replayed"));
  // Another body on that key: the mismatch is known without the store too.
  EXPECT_EQ(
      ProblemMismatch(SendOnce(server.port(), Post("/x", R"({"n":2})", "done")),
                      422, "idempotency_key_reused"),
      "");
  // A new key still needs the store, and the stuck pool answers 503.
  EXPECT_EQ(ProblemMismatch(SendOnce(server.port(), Post("/x", kBody, "new")),
                            503, "idempotency_store_unavailable"),
            "");
  EXPECT_EQ(store->claims.load(), claims);
  EXPECT_EQ(runs.load(), 1);

  store->Open();
  holder.join();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->result_int(), 200u);
}

TEST_P(StoreQueueTest, ThePoolFollowsTheStoresConcurrency) {
  std::atomic<int> runs{0};
  auto store = std::make_shared<GateStore>(/*max_concurrent_calls=*/3);
  AdapterServer server(GetParam(), CountingHandler(runs), OnThePool(store));
  EXPECT_EQ(server.store_threads(), 3u);
  store->Hold();
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] {
      SendOnce(server.port(), Post("/x", kBody, "p-" + std::to_string(i)));
    });
  }
  // Three claims inside the store at once: three threads.
  EXPECT_TRUE(WaitFor([&] { return store->waiting() == 3; }));
  store->Open();
  for (auto& t : clients) t.join();

  AdapterServer other(GetParam(), CountingHandler(runs),
                      OnThePool(std::make_shared<GateStore>()));
  EXPECT_EQ(other.store_threads(), 4u);
}

}  // namespace
}  // namespace idem::testing
