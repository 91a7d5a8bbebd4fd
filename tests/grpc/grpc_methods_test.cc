// The gRPC adapter's set-up (what Create and Protect refuse), the callback
// API's handler forms and threads, and a burst on a durable store.

#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "grpc_test_server.h"
#include "idem/memory_store.h"
#include "idem/open_store.h"
#include "idem/store/forwarding_store.h"
#include "idem/store/local_cache.h"
#include "support/faulty_store.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace idem::grpc_test {
namespace {

using ::grpc::StatusCode;
using idem::grpc::IdempotentMethods;
using idem::grpc::IdempotentMethodsOptions;
using idem::test::v1::GetStatsRequest;
using idem::test::v1::Stats;
using ::testing::HasSubstr;

CreateOrderRequest Req(std::string item = "book") {
  CreateOrderRequest r;
  r.set_item(std::move(item));
  r.set_quantity(1);
  return r;
}

std::shared_ptr<Guard> MemoryGuard() {
  GuardSetup setup;
  setup.store = std::shared_ptr<Store>(std::move(*MemoryStore::Open({})));
  return std::shared_ptr<Guard>(std::move(*Guard::Create(std::move(setup))));
}

// Records the threads the store is called on, and how many of its calls
// were made inside the callback API's CreateOrder (on the gRPC thread that
// started the call, before it returned). Its Info says calls may block
// unless told otherwise: the callback API must then call it from the
// store-call pool.
class ThreadRecordingStore final : public ForwardingStore {
 public:
  explicit ThreadRecordingStore(std::shared_ptr<Store> inner,
                                bool may_block = true)
      : ForwardingStore(std::move(inner)), may_block_(may_block) {}
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override {
    Record();
    return ForwardingStore::Claim(id, fp, now, ttl, lock_timeout);
  }
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const idem::Response& response) override {
    Record();
    return ForwardingStore::Complete(id, token, response);
  }
  Result<bool> CompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const idem::Response> response) override {
    Record();
    return ForwardingStore::CompleteShared(id, token, std::move(response));
  }
  StoreInfo Info() const override {
    StoreInfo info = ForwardingStore::Info();
    info.calls_may_block = may_block_;
    return info;
  }
  std::set<std::thread::id> threads() {
    std::lock_guard lock(mu_);
    return threads_;
  }
  int calls_in_create_order() {
    std::lock_guard lock(mu_);
    return in_create_order_;
  }
  int calls_elsewhere() {
    std::lock_guard lock(mu_);
    return elsewhere_;
  }

 private:
  void Record() {
    std::lock_guard lock(mu_);
    threads_.insert(std::this_thread::get_id());
    ++(TestServer::InCreateOrder() ? in_create_order_ : elsewhere_);
  }
  const bool may_block_;
  std::mutex mu_;
  std::set<std::thread::id> threads_;
  int in_create_order_ = 0;
  int elsewhere_ = 0;
};

TEST(GrpcMethodsTest, CreateRefusesToStartWithoutAScopeChoice) {
  IdempotentMethodsOptions options;
  options.guard = MemoryGuard();
  auto methods = IdempotentMethods::Create(std::move(options));
  ASSERT_FALSE(methods.has_value());
  EXPECT_EQ(methods.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(methods.error().message(), HasSubstr("`scope`"));
  EXPECT_THAT(methods.error().message(),
              HasSubstr("IdempotentMethodsOptions::scope"));
}

TEST(GrpcMethodsTest, CreateRefusesAMissingGuardAndZeroThreads) {
  EXPECT_FALSE(IdempotentMethods::Create({.scope = idem::grpc::SharedScope()})
                   .has_value());
  auto zero = IdempotentMethods::Create({.guard = MemoryGuard(),
                                         .scope = idem::grpc::SharedScope(),
                                         .threads = 0});
  ASSERT_FALSE(zero.has_value());
  EXPECT_THAT(zero.error().message(), HasSubstr("threads"));
}

TEST(GrpcMethodsTest, ProtectRefusesWhatItCannotProtect) {
  auto methods = *IdempotentMethods::Create(
      {.guard = MemoryGuard(), .scope = idem::grpc::SharedScope()});
  auto handler = [](::grpc::ServerContextBase&, const CreateOrderRequest&,
                    Order&) { return ::grpc::Status::OK; };
  auto misspelt = methods->ProtectCallback<CreateOrderRequest, Order>(
      "/idem.test.v1.Orders/CreateOrdr", handler);
  ASSERT_FALSE(misspelt.has_value());
  EXPECT_THAT(misspelt.error().message(), HasSubstr("not in the program"));

  auto not_a_name = methods->ProtectCallback<CreateOrderRequest, Order>(
      "CreateOrder", handler);
  ASSERT_FALSE(not_a_name.has_value());
  EXPECT_THAT(not_a_name.error().message(), HasSubstr("full method name"));

  auto streaming = methods->ProtectCallback<GetStatsRequest, Order>(
      "/idem.test.v1.Orders/WatchOrders",
      [](::grpc::ServerContextBase&, const GetStatsRequest&, Order&) {
        return ::grpc::Status::OK;
      });
  ASSERT_FALSE(streaming.has_value());
  EXPECT_THAT(streaming.error().message(), HasSubstr("streaming"));

  auto wrong_types = methods->ProtectCallback<CreateOrderRequest, Order>(
      "/idem.test.v1.Orders/GetStats", handler);
  ASSERT_FALSE(wrong_types.has_value());
  EXPECT_THAT(wrong_types.error().message(),
              HasSubstr("idem.test.v1.GetStatsRequest"));

  idem::grpc::MethodOptions upper;
  upper.replayed_trailing_metadata = {"X-Trace"};
  auto bad_key = methods->ProtectCallback<CreateOrderRequest, Order>(
      kCreateOrder, handler, upper);
  ASSERT_FALSE(bad_key.has_value());
  EXPECT_THAT(bad_key.error().message(),
              HasSubstr("replayed_trailing_metadata"));

  idem::grpc::MethodOptions bad_guard;
  bad_guard.guard = GuardOptions();
  bad_guard.guard->ttl = Duration::zero();
  auto invalid = methods->ProtectSync<CreateOrderRequest, Order>(
      kCreateOrder, handler, bad_guard);
  ASSERT_FALSE(invalid.has_value());
  EXPECT_EQ(invalid.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(invalid.error().message(), HasSubstr("ttl"));

  auto good = methods->ProtectCallback<CreateOrderRequest, Order>(kCreateOrder,
                                                                  handler);
  EXPECT_TRUE(good.has_value());
}

TEST(GrpcMethodsTest, AMethodNeverSetUpRefusesCallsRatherThanRunUnprotected) {
  idem::grpc::SyncMethod<CreateOrderRequest, Order> never_set_up;
  ::grpc::ServerContext context;
  const CreateOrderRequest request = Req();
  Order order;
  const ::grpc::Status status = never_set_up(&context, &request, &order);
  EXPECT_EQ(status.error_code(), StatusCode::INTERNAL);
  EXPECT_THAT(status.error_message(), HasSubstr("never set up"));
}

// A message is protobuf: a guard's fingerprint_fields (for its HTTP routes)
// would refuse every call as not JSON, so methods identify calls by the
// whole message instead.
TEST(GrpcMethodsTest, TheGuardsFingerprintFieldsDoNotApplyToMessages) {
  ServerSetup setup;
  setup.guard_options.fingerprint_fields = {"/item"};
  TestServer server(std::move(setup));
  ASSERT_TRUE(server.ok()) << server.error();
  const Reply first = server.Call(Req("book"), "k1");
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(server.Call(Req("book"), "k1").Trailing("idempotent-replayed"),
            "true");
  CreateOrderRequest other = Req("book");
  other.set_quantity(2);
  EXPECT_EQ(server.Call(other, "k1").status.error_code(),
            StatusCode::FAILED_PRECONDITION);
}

TEST(GrpcMethodsTest, CoroutineAndSynchronousFormsWorkOnTheCallbackApi) {
  for (Form form : {Form::kCoroutine, Form::kReadyCoroutine, Form::kSync}) {
    ServerSetup setup;
    setup.form = form;
    TestServer server(std::move(setup));
    ASSERT_TRUE(server.ok()) << server.error();
    EXPECT_EQ(server.Call(Req(), "k1").order.id(), "order-1");
    const Reply retry = server.Call(Req(), "k1");
    EXPECT_EQ(retry.order.id(), "order-1");
    EXPECT_EQ(retry.Trailing("idempotent-replayed"), "true");
    // A handler that throws releases its key.
    EXPECT_EQ(server.Call(Req("throw"), "k2").status.error_code(),
              StatusCode::UNKNOWN);
    EXPECT_EQ(server.guard().metrics().Get(Outcome::kReleased), 1u);
    EXPECT_EQ(server.runs(), 1);
  }
}

TEST(GrpcMethodsTest, CallsRunOnAnExecutorTheApplicationGives) {
  net::io_context io;
  auto work = net::make_work_guard(io);
  std::promise<std::thread::id> io_thread_id;
  std::thread runner([&] {
    io_thread_id.set_value(std::this_thread::get_id());
    io.run();
  });
  const std::thread::id io_thread = io_thread_id.get_future().get();
  {
    ServerSetup setup;
    setup.form = Form::kCoroutine;
    setup.executor = io.get_executor();
    TestServer server(std::move(setup));
    ASSERT_TRUE(server.ok()) << server.error();
    EXPECT_EQ(server.Call(Req(), "k1").order.id(), "order-1");
    EXPECT_EQ(server.Call(Req(), "k1").Trailing("idempotent-replayed"), "true");
    // The handler ran on the io_context's thread.
    EXPECT_EQ(server.handler_threads(), std::set<std::thread::id>{io_thread});
  }
  work.reset();
  runner.join();
}

TEST(GrpcMethodsTest, BlockingStoreCallsNeverRunOnAGrpcThread) {
  auto store = std::make_shared<ThreadRecordingStore>(
      std::shared_ptr<Store>(std::move(*MemoryStore::Open({}))));
  ServerSetup setup;
  setup.store = store;
  TestServer server(std::move(setup));
  ASSERT_TRUE(server.ok()) << server.error();
  EXPECT_TRUE(server.methods().store_calls_on_pool());
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(server.Call(Req(), "k" + std::to_string(i)).status.ok());
  }
  const std::set<std::thread::id> grpc = server.grpc_threads();
  ASSERT_FALSE(grpc.empty());
  for (std::thread::id id : store->threads()) EXPECT_EQ(grpc.count(id), 0u);
  EXPECT_EQ(store->calls_in_create_order(), 0);
  EXPECT_EQ(server.runs_in_create_order(), 0);
}

// In front of a local cache (whose inner store says it blocks): counts the
// claims the cache answered without blocking inside the callback API's
// CreateOrder, on the gRPC thread that started the call.
class AnsweredInlineCounter final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  std::optional<Result<ClaimResult>> TryClaimWithoutBlocking(
      const RecordId& id, const Fingerprint& fp, TimePoint now, Duration ttl,
      Duration lock_timeout) override {
    auto answer = ForwardingStore::TryClaimWithoutBlocking(id, fp, now, ttl,
                                                           lock_timeout);
    if (answer && TestServer::InCreateOrder()) ++answered_in_create_order;
    return answer;
  }
  std::atomic<int> answered_in_create_order{0};
};

// A blocking store behind a local cache: the first call's claim and
// completion run on the pool; its replay is answered from the cache on the
// gRPC thread that started it, with no store call that may block there.
TEST(GrpcMethodsTest, ACachedReplayIsAnsweredOnTheGrpcThread) {
  auto inner = std::make_unique<ThreadRecordingStore>(
      std::shared_ptr<Store>(std::move(*MemoryStore::Open({}))));
  ThreadRecordingStore* recording = inner.get();
  auto cached = LocalCacheStore::Wrap(std::move(inner), {.max_records = 16});
  ASSERT_TRUE(cached.has_value());
  auto store = std::make_shared<AnsweredInlineCounter>(
      std::shared_ptr<Store>(std::move(*cached)));
  ServerSetup setup;
  setup.store = store;
  TestServer server(std::move(setup));
  ASSERT_TRUE(server.ok()) << server.error();
  EXPECT_TRUE(server.methods().store_calls_on_pool());
  const Reply first = server.Call(Req(), "k1");
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  const int inner_calls = recording->calls_elsewhere();
  EXPECT_EQ(store->answered_in_create_order, 0);

  const Reply replay = server.Call(Req(), "k1");
  EXPECT_EQ(replay.order.id(), "order-1");
  EXPECT_EQ(replay.Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(server.runs(), 1);
  EXPECT_EQ(store->answered_in_create_order, 1);
  EXPECT_EQ(recording->calls_elsewhere(), inner_calls);  // No round trip.
  EXPECT_EQ(recording->calls_in_create_order(), 0);
}

// A store whose calls never block: no hop. The decision, and a handler
// that never suspends (synchronous, or a coroutine ready at once), run
// inside the call gRPC made to start the call (on its thread, before it
// returned), stored and answered there, for a fresh call and a replay; a
// coroutine that suspends starts there and continues on the executor, its
// result stored there.
TEST(GrpcMethodsTest, AnInlineStoreServesTheCallOnTheGrpcThreadThatStartedIt) {
  for (Form form : {Form::kSync, Form::kReadyCoroutine, Form::kCoroutine}) {
    auto store = std::make_shared<ThreadRecordingStore>(
        std::shared_ptr<Store>(std::move(*MemoryStore::Open({}))),
        /*may_block=*/false);
    ServerSetup setup;
    setup.form = form;
    setup.store = store;
    TestServer server(std::move(setup));
    ASSERT_TRUE(server.ok()) << server.error();
    EXPECT_FALSE(server.methods().store_calls_on_pool());
    const Reply first = server.Call(Req(), "k1");
    ASSERT_TRUE(first.status.ok()) << first.status.error_message();
    const Reply replay = server.Call(Req(), "k1");
    EXPECT_EQ(replay.order.id(), "order-1");
    EXPECT_EQ(replay.Trailing("idempotent-replayed"), "true");
    EXPECT_EQ(server.runs(), 1);
    // Two claims (the replay's found the record).
    EXPECT_GE(store->calls_in_create_order(), 2);
    if (form != Form::kCoroutine) {
      // The claim, the handler and the completion: all inside.
      EXPECT_EQ(store->calls_elsewhere(), 0);
      EXPECT_EQ(server.runs_in_create_order(), 1);
    } else {
      // The handler resumed on the executor, and the completion with it.
      EXPECT_EQ(server.runs_in_create_order(), 0);
      EXPECT_GE(store->calls_elsewhere(), 1);
    }
  }
}

// Callback API: a timer renews while the handler holds no thread; sync
// API: the Guard's renewal thread while the handler blocks its own.
TEST(GrpcMethodsTest, LockRenewalRunsWhileAHandlerWaits) {
  for (bool sync_api : {false, true}) {
    auto memory = std::shared_ptr<Store>(std::move(*MemoryStore::Open({})));
    auto faulty = std::make_shared<testing::FaultyStore>(memory);
    ServerSetup setup;
    setup.sync_api = sync_api;
    setup.store = faulty;
    setup.clock = SystemClock::Instance();
    setup.guard_options.lock_renewal = std::chrono::milliseconds(20);
    TestServer server(std::move(setup));
    ASSERT_TRUE(server.ok()) << server.error();
    server.gate().Close();
    Reply first;
    std::thread a([&] { first = server.Call(Req(), "k1"); });
    ASSERT_TRUE(server.gate().WaitHeld(1));
    EXPECT_TRUE(testing::WaitFor([&] { return faulty->extends.load() >= 2; }))
        << (sync_api ? "sync" : "callback");
    server.gate().Open();
    a.join();
    EXPECT_TRUE(first.status.ok());
    EXPECT_EQ(server.Call(Req(), "k1").Trailing("idempotent-replayed"), "true");
    EXPECT_EQ(server.runs(), 1);
  }
}

TEST(GrpcMethodsTest, UnprotectedMethodsOfTheServiceRunAsUsual) {
  TestServer server{ServerSetup{}};
  ASSERT_TRUE(server.ok()) << server.error();
  server.Call(Req(), "k1");
  auto stub = idem::test::v1::Orders::NewStub(server.channel());
  ::grpc::ClientContext context;
  Stats stats;
  ASSERT_TRUE(stub->GetStats(&context, GetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.handler_runs(), 1);
}

// Fifty calls with one key on a durable store (a SQLite file, a RocksDB
// directory): the handler runs once, the others replay it (callback API:
// store calls on the pool; sync API: inline on gRPC's threads).
TEST(GrpcMethodsTest, ABurstOnADurableStoreRunsTheHandlerOnce) {
  testing::TempDir dir("idem-grpc");
  for (std::string scheme : {"sqlite", "rocksdb"}) {
    for (bool sync_api : {false, true}) {
      const std::string where = scheme + (sync_api ? "-sync" : "-callback");
      auto store = OpenStore(scheme + ":" + (dir.path() / where).string());
      ASSERT_TRUE(store.has_value()) << store.error().ToString();
      ServerSetup setup;
      setup.sync_api = sync_api;
      setup.store = std::shared_ptr<Store>(std::move(*store));
      setup.clock = SystemClock::Instance();
      setup.guard_options.lock_wait = std::chrono::seconds(120);
      TestServer server(std::move(setup));
      ASSERT_TRUE(server.ok()) << server.error();
      if (!sync_api) {
        EXPECT_TRUE(server.methods().store_calls_on_pool());
      }
      const std::vector<Reply> replies =
          server.Burst(Req(), CallOptions{.keys = {"burst"}}, 50);
      int replayed = 0;
      for (const Reply& r : replies) {
        ASSERT_TRUE(r.status.ok()) << where << ": " << r.status.error_message();
        EXPECT_EQ(r.order.id(), "order-1");
        if (r.Trailing("idempotent-replayed") == "true") ++replayed;
      }
      EXPECT_EQ(server.runs(), 1) << where;
      EXPECT_EQ(replayed, 49) << where;
    }
  }
}

}  // namespace
}  // namespace idem::grpc_test
