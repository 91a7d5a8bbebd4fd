// SEMANTICS.md's rows that apply to gRPC ("gRPC"), through a real gRPC
// server and client on 127.0.0.1, for the callback API and the synchronous
// API alike (the test parameter).

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grpc_test_server.h"
#include "idem/clock.h"
#include "idem/memory_store.h"
#include "idem/metrics.h"
#include "idem/problem.h"
#include "support/down_store.h"
#include "support/faulty_store.h"
#include "support/wait_for.h"

namespace idem::grpc_test {
namespace {

using ::grpc::StatusCode;
using ::testing::HasSubstr;

CreateOrderRequest Req(std::string item = "book", int quantity = 1,
                       StatusCode fail_with = StatusCode::OK) {
  CreateOrderRequest r;
  r.set_item(std::move(item));
  r.set_quantity(quantity);
  r.set_fail_with(static_cast<int>(fail_with));
  return r;
}

std::shared_ptr<testing::FaultyStore> FaultyMemory() {
  auto memory = MemoryStore::Open({});
  EXPECT_TRUE(memory.has_value());
  return std::make_shared<testing::FaultyStore>(std::move(*memory));
}

class GrpcAdapterTest : public ::testing::TestWithParam<bool> {
 protected:
  std::unique_ptr<TestServer> Start(ServerSetup setup = {}) {
    setup.sync_api = GetParam();
    auto server = std::make_unique<TestServer>(std::move(setup));
    EXPECT_TRUE(server->ok()) << server->error();
    return server;
  }
};

#define START_OR_FAIL(server, setup) \
  auto server = Start(setup);        \
  ASSERT_TRUE(server->ok()) << server->error()

TEST_P(GrpcAdapterTest, TheFirstCallRunsTheHandlerAndARetryReplaysItMarked) {
  START_OR_FAIL(server, {});
  const Reply first = server->Call(Req(), "k1");
  ASSERT_TRUE(first.status.ok()) << first.status.error_message();
  EXPECT_EQ(first.order.id(), "order-1");
  EXPECT_EQ(first.Trailing("idempotent-replayed"), "");

  const Reply retry = server->Call(Req(), "k1");
  ASSERT_TRUE(retry.status.ok()) << retry.status.error_message();
  EXPECT_EQ(retry.order.id(), "order-1");
  EXPECT_EQ(retry.order.item(), "book");
  EXPECT_EQ(retry.Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(retry.Trailing("idem-problem"), "");
  EXPECT_EQ(server->runs(), 1);
  EXPECT_EQ(server->guard().metrics().Get(Outcome::kExecuted), 1u);
  EXPECT_EQ(server->guard().metrics().Get(Outcome::kReplayed), 1u);

  // Another key is another call.
  EXPECT_EQ(server->Call(Req(), "k2").order.id(), "order-2");
}

TEST_P(GrpcAdapterTest, AQuotedKeyIsTheSameKeyAsTheBareToken) {
  START_OR_FAIL(server, {});
  ASSERT_TRUE(server->Call(Req(), "abc").status.ok());
  const Reply retry = server->Call(Req(), "\"abc\"");
  EXPECT_EQ(retry.order.id(), "order-1");
  EXPECT_EQ(retry.Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(server->runs(), 1);
}

TEST_P(GrpcAdapterTest, TheSameKeyWithAnotherRequestIsFailedPrecondition) {
  START_OR_FAIL(server, {});
  ASSERT_TRUE(server->Call(Req("book", 1), "k1").status.ok());
  const Reply other = server->Call(Req("book", 2), "k1");
  EXPECT_EQ(other.status.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(other.status.error_message(), HasSubstr("new key"));
  EXPECT_EQ(other.Trailing("idem-problem"), "idempotency_key_reused");
  EXPECT_EQ(other.Trailing("idempotent-replayed"), "");
  EXPECT_EQ(server->runs(), 1);
}

TEST_P(GrpcAdapterTest, FingerprintMetadataIsPartOfTheRequest) {
  ServerSetup setup;
  setup.method.fingerprint_metadata = {"x-region"};
  START_OR_FAIL(server, std::move(setup));
  CallOptions eu{.keys = {"k1"}, .metadata = {{"x-region", "eu"}}};
  CallOptions us{.keys = {"k1"}, .metadata = {{"x-region", "us"}}};
  ASSERT_TRUE(server->Call(Req(), eu).status.ok());
  EXPECT_EQ(server->Call(Req(), us).status.error_code(),
            StatusCode::FAILED_PRECONDITION);
  // Metadata outside the fingerprint does not matter.
  eu.metadata.emplace_back("x-other", "1");
  EXPECT_EQ(server->Call(Req(), eu).Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(server->runs(), 1);
}

TEST_P(GrpcAdapterTest, MapFieldsInAnyOrderAreTheSameRequest) {
  START_OR_FAIL(server, {});
  CreateOrderRequest a = Req();
  CreateOrderRequest b = Req();
  for (int i = 0; i < 32; ++i) {
    (*a.mutable_labels())["label-" + std::to_string(i)] = i;
    (*b.mutable_labels())["label-" + std::to_string(31 - i)] = 31 - i;
  }
  ASSERT_TRUE(server->Call(a, "k1").status.ok());
  const Reply retry = server->Call(b, "k1");
  EXPECT_TRUE(retry.status.ok()) << retry.status.error_message();
  EXPECT_EQ(retry.Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(server->runs(), 1);
}

TEST_P(GrpcAdapterTest, AMissingKeyIsInvalidArgument) {
  START_OR_FAIL(server, {});
  const Reply reply = server->Call(Req(), CallOptions{});
  EXPECT_EQ(reply.status.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(reply.status.error_message(),
              HasSubstr("idempotency-key metadata"));
  EXPECT_EQ(reply.Trailing("idem-problem"), "idempotency_key_missing");
  EXPECT_EQ(server->runs(), 0);
}

TEST_P(GrpcAdapterTest, AMissingKeyOnAKeyOptionalMethodRunsUnprotected) {
  ServerSetup setup;
  GuardOptions optional;
  optional.key_required = false;
  setup.method.guard = optional;
  START_OR_FAIL(server, std::move(setup));
  EXPECT_EQ(server->Call(Req(), CallOptions{}).order.id(), "order-1");
  EXPECT_EQ(server->Call(Req(), CallOptions{}).order.id(), "order-2");
}

TEST_P(GrpcAdapterTest, InvalidKeysAreInvalidArgumentAsOnHttp) {
  START_OR_FAIL(server, {});
  const std::vector<CallOptions> invalid = {
      {.keys = {"\"unterminated"}},
      {.keys = {"a\"b"}},
      {.keys = {std::string(256, 'k')}},
      {.keys = {""}},
      {.keys = {"k1", "k1"}},  // Sent twice: as a repeated HTTP header.
  };
  for (const CallOptions& options : invalid) {
    const Reply reply = server->Call(Req(), options);
    EXPECT_EQ(reply.status.error_code(), StatusCode::INVALID_ARGUMENT)
        << options.keys[0];
    EXPECT_EQ(reply.Trailing("idem-problem"), "idempotency_key_invalid");
    EXPECT_THAT(reply.status.error_message(),
                HasSubstr("idempotency-key metadata"));
  }
  EXPECT_EQ(server->runs(), 0);
}

TEST_P(GrpcAdapterTest, ARequestOverMaxRequestBodyIsResourceExhausted) {
  ServerSetup setup;
  setup.guard_options.max_request_body = 64;
  START_OR_FAIL(server, std::move(setup));
  CreateOrderRequest big = Req();
  big.set_padding(std::string(1000, 'p'));
  const Reply reply = server->Call(big, "k1");
  EXPECT_EQ(reply.status.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(reply.Trailing("idem-problem"), "request_too_large");
  EXPECT_THAT(reply.status.error_message(),
              HasSubstr("request message is larger than the 64 bytes this "
                        "method accepts"));
  EXPECT_EQ(server->runs(), 0);
  // A small one with another key runs.
  EXPECT_TRUE(server->Call(Req(), "k2").status.ok());
}

TEST_P(GrpcAdapterTest, ACallInProgressIsAbortedWithRetryAfter) {
  START_OR_FAIL(server, {});  // lock_wait 0: answer at once.
  server->gate().Close();
  Reply first;
  std::thread a([&] { first = server->Call(Req(), "k1"); });
  ASSERT_TRUE(server->gate().WaitHeld(1));
  const Reply second = server->Call(Req(), "k1");
  EXPECT_EQ(second.status.error_code(), StatusCode::ABORTED);
  EXPECT_EQ(second.Trailing("idem-problem"), "idempotency_request_in_progress");
  EXPECT_EQ(second.Trailing("retry-after"), "1");
  // The same wait as gRPC's retry policy reads it (server pushback).
  EXPECT_EQ(second.Trailing("grpc-retry-pushback-ms"), "1000");
  EXPECT_THAT(second.status.error_message(), HasSubstr("retry"));
  server->gate().Open();
  a.join();
  EXPECT_TRUE(first.status.ok());
  EXPECT_EQ(server->runs(), 1);
}

TEST_P(GrpcAdapterTest, LockWaitWaitsForTheCallInProgressThenReplaysIt) {
  auto faulty = FaultyMemory();
  ServerSetup setup;
  setup.store = faulty;
  // Real time: the waiting call polls until the first completes; the
  // lock_wait bound is far away.
  setup.clock = SystemClock::Instance();
  setup.guard_options.lock_wait = std::chrono::seconds(120);
  START_OR_FAIL(server, std::move(setup));
  server->gate().Close();
  Reply first;
  Reply second;
  std::thread a([&] { first = server->Call(Req(), "k1"); });
  ASSERT_TRUE(server->gate().WaitHeld(1));
  std::thread b([&] { second = server->Call(Req(), "k1"); });
  // The second call has found the key in progress and is waiting.
  ASSERT_TRUE(testing::WaitFor([&] { return faulty->claims.load() >= 2; }));
  server->gate().Open();
  a.join();
  b.join();
  ASSERT_TRUE(first.status.ok());
  ASSERT_TRUE(second.status.ok()) << second.status.error_message();
  EXPECT_EQ(second.order.id(), first.order.id());
  EXPECT_EQ(second.Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(server->runs(), 1);
}

TEST_P(GrpcAdapterTest, ABurstOfFiftySameKeyCallsRunsTheHandlerOnce) {
  ServerSetup setup;
  setup.clock = SystemClock::Instance();
  setup.guard_options.lock_wait = std::chrono::seconds(120);
  START_OR_FAIL(server, std::move(setup));
  const std::vector<Reply> replies =
      server->Burst(Req(), CallOptions{.keys = {"burst"}}, 50);
  int replayed = 0;
  for (const Reply& r : replies) {
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.order.id(), "order-1");
    if (r.Trailing("idempotent-replayed") == "true") ++replayed;
  }
  EXPECT_EQ(server->runs(), 1);
  EXPECT_EQ(replayed, 49);
}

TEST_P(GrpcAdapterTest, ScopesKeepTwoCallersKeysApart) {
  ServerSetup setup;
  setup.scope = [](const ::grpc::ServerContextBase& context)
      -> std::optional<std::string> {
    const auto& md = context.client_metadata();
    auto it = md.find("authorization");
    if (it == md.end()) return std::nullopt;
    const std::string value(it->second.data(), it->second.size());
    if (value.rfind("Bearer ", 0) != 0) return std::nullopt;
    return value.substr(7);
  };
  START_OR_FAIL(server, std::move(setup));
  CallOptions alice{.keys = {"k1"},
                    .metadata = {{"authorization", "Bearer alice"}}};
  CallOptions bob{.keys = {"k1"},
                  .metadata = {{"authorization", "Bearer bob"}}};
  const Reply a1 = server->Call(Req(), alice);
  const Reply b1 = server->Call(Req(), bob);
  ASSERT_TRUE(a1.status.ok());
  ASSERT_TRUE(b1.status.ok());
  EXPECT_NE(a1.order.id(), b1.order.id());
  EXPECT_EQ(server->runs(), 2);
  EXPECT_EQ(server->Call(Req(), alice).order.id(), a1.order.id());
  EXPECT_EQ(server->Call(Req(), bob).order.id(), b1.order.id());
  EXPECT_EQ(server->runs(), 2);
}

TEST_P(GrpcAdapterTest, AScopeResolverThatThrowsFailsTheCallUnrun) {
  for (bool standard : {true, false}) {
    ServerSetup setup;
    setup.scope =
        [standard](
            const ::grpc::ServerContextBase&) -> std::optional<std::string> {
      if (standard) throw std::runtime_error("no identity service");
      throw 42;  // Not a std::exception: the call still ends.
    };
    START_OR_FAIL(server, std::move(setup));
    const Reply reply = server->Call(Req(), "k1");
    EXPECT_EQ(reply.status.error_code(), StatusCode::INTERNAL);
    EXPECT_EQ(server->runs(), 0);
  }
}

TEST_P(GrpcAdapterTest, AnAnonymousCallIsUnauthenticatedWhenRejected) {
  ServerSetup setup;
  setup.guard_options.anonymous = AnonymousPolicy::kReject;
  setup.scope =
      [](const ::grpc::ServerContextBase&) -> std::optional<std::string> {
    return std::nullopt;
  };
  START_OR_FAIL(server, std::move(setup));
  const Reply reply = server->Call(Req(), "k1");
  EXPECT_EQ(reply.status.error_code(), StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(reply.Trailing("idem-problem"),
            "idempotency_authentication_required");
  EXPECT_EQ(server->runs(), 0);
}

TEST_P(GrpcAdapterTest, ADeadlineThatPassesMidHandlerStillStoresTheResult) {
  ServerSetup setup;
  setup.clock = SystemClock::Instance();
  setup.guard_options.lock_wait = std::chrono::seconds(120);
  START_OR_FAIL(server, std::move(setup));
  server->gate().Close();
  // Long enough for a loaded machine to reach the handler first.
  CallOptions hurried{.keys = {"k1"},
                      .deadline = std::chrono::milliseconds(1000)};
  Reply first;
  std::thread a([&] { first = server->Call(Req(), hurried); });
  const bool held = server->gate().WaitHeld(1);
  a.join();  // The client gives up at its deadline; the handler still runs.
  ASSERT_TRUE(held);
  EXPECT_EQ(first.status.error_code(), StatusCode::DEADLINE_EXCEEDED);
  server->gate().Open();
  // The retry waits (lock_wait) for the handler's result, then replays it.
  const Reply retry = server->Call(Req(), "k1");
  ASSERT_TRUE(retry.status.ok()) << retry.status.error_message();
  EXPECT_EQ(retry.order.id(), "order-1");
  EXPECT_EQ(retry.Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(server->runs(), 1);
}

TEST_P(GrpcAdapterTest, ACallTheClientCancelsStillStoresTheResult) {
  ServerSetup setup;
  setup.clock = SystemClock::Instance();
  setup.guard_options.lock_wait = std::chrono::seconds(120);
  START_OR_FAIL(server, std::move(setup));
  server->gate().Close();
  CallOptions cancelled{.keys = {"k1"},
                        .started = [&](::grpc::ClientContext& context) {
                          ASSERT_TRUE(server->gate().WaitHeld(1));
                          context.TryCancel();
                        }};
  const Reply first = server->Call(Req(), cancelled);
  EXPECT_EQ(first.status.error_code(), StatusCode::CANCELLED);
  server->gate().Open();
  const Reply retry = server->Call(Req(), "k1");
  ASSERT_TRUE(retry.status.ok()) << retry.status.error_message();
  EXPECT_EQ(retry.order.id(), "order-1");
  EXPECT_EQ(retry.Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(server->runs(), 1);
}

TEST_P(GrpcAdapterTest, RetryableStatusesReleaseTheKey) {
  START_OR_FAIL(server, {});
  for (StatusCode code : {StatusCode::UNAVAILABLE, StatusCode::INTERNAL,
                          StatusCode::CANCELLED, StatusCode::ABORTED}) {
    const std::string key = "k" + std::to_string(static_cast<int>(code));
    const int before = server->runs();
    const Reply failed = server->Call(Req("book", 1, code), key);
    EXPECT_EQ(failed.status.error_code(), code);
    EXPECT_EQ(failed.status.error_message(), "handler failed");
    const Reply retry = server->Call(Req("book", 1, code), key);
    EXPECT_EQ(retry.status.error_code(), code);
    EXPECT_EQ(retry.Trailing("idempotent-replayed"), "");
    EXPECT_EQ(server->runs(), before + 2) << static_cast<int>(code);
  }
  EXPECT_EQ(server->guard().metrics().Get(Outcome::kReleased), 8u);
}

TEST_P(GrpcAdapterTest, AStoredErrorStatusIsReplayedWithMessageAndDetails) {
  START_OR_FAIL(server, {});
  const Reply first = server->Call(Req("book", 1, StatusCode::NOT_FOUND), "k1");
  EXPECT_EQ(first.status.error_code(), StatusCode::NOT_FOUND);
  const Reply retry = server->Call(Req("book", 1, StatusCode::NOT_FOUND), "k1");
  EXPECT_EQ(retry.status.error_code(), StatusCode::NOT_FOUND);
  EXPECT_EQ(retry.status.error_message(), "handler failed");
  EXPECT_EQ(retry.status.error_details(), kDetails);
  EXPECT_EQ(retry.Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(server->runs(), 1);
}

TEST_P(GrpcAdapterTest, StoredStatusesAreConfigurablePerMethod) {
  ServerSetup setup;
  setup.method.stored_statuses = {StatusCode::OK, StatusCode::UNAVAILABLE};
  START_OR_FAIL(server, std::move(setup));
  server->Call(Req("book", 1, StatusCode::UNAVAILABLE), "k1");
  const Reply replayed =
      server->Call(Req("book", 1, StatusCode::UNAVAILABLE), "k1");
  EXPECT_EQ(replayed.status.error_code(), StatusCode::UNAVAILABLE);
  EXPECT_EQ(replayed.Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(server->runs(), 1);
  server->Call(Req("book", 1, StatusCode::NOT_FOUND), "k2");
  server->Call(Req("book", 1, StatusCode::NOT_FOUND), "k2");
  EXPECT_EQ(server->runs(), 3);  // NOT_FOUND is not stored here.
}

TEST_P(GrpcAdapterTest, AllowlistedMetadataIsReplayedAndNoOther) {
  ServerSetup setup;
  setup.method.replayed_initial_metadata = {"x-order-version"};
  setup.method.replayed_trailing_metadata = {"x-trace"};
  START_OR_FAIL(server, std::move(setup));
  const Reply first = server->Call(Req(), "k1");
  EXPECT_EQ(first.Initial("x-order-version"), "1");
  EXPECT_EQ(first.Trailing("x-trace"), "trace-1");
  EXPECT_EQ(first.Trailing("x-secret"), "secret-1");
  const Reply retry = server->Call(Req(), "k1");
  EXPECT_EQ(retry.Initial("x-order-version"), "1");
  EXPECT_EQ(retry.Trailing("x-trace"), "trace-1");
  EXPECT_EQ(retry.Trailing("x-secret"), "");
  EXPECT_EQ(retry.Trailing("idempotent-replayed"), "true");
}

TEST_P(GrpcAdapterTest, AHandlerThatThrowsIsUnknownAndReleasesItsKey) {
  START_OR_FAIL(server, {});
  for (int i = 0; i < 2; ++i) {
    const Reply reply = server->Call(Req("throw"), "k1");
    EXPECT_EQ(reply.status.error_code(), StatusCode::UNKNOWN);
  }
  EXPECT_EQ(server->guard().metrics().Get(Outcome::kExecuted), 2u);
  EXPECT_EQ(server->guard().metrics().Get(Outcome::kReleased), 2u);
}

TEST_P(GrpcAdapterTest, AnUnreachableStoreFailsClosedWithUnavailable) {
  ServerSetup setup;
  setup.store = std::make_shared<testing::DownStore>();
  START_OR_FAIL(server, std::move(setup));
  const Reply reply = server->Call(Req(), "k1");
  EXPECT_EQ(reply.status.error_code(), StatusCode::UNAVAILABLE);
  EXPECT_EQ(reply.Trailing("idem-problem"), "idempotency_store_unavailable");
  EXPECT_EQ(reply.Trailing("retry-after"), "1");
  EXPECT_EQ(reply.Trailing("grpc-retry-pushback-ms"), "1000");
  EXPECT_EQ(server->runs(), 0);
}

TEST_P(GrpcAdapterTest, AFullStoreIsResourceExhausted) {
  auto faulty = FaultyMemory();
  faulty->fail_claim = ErrorCode::kResourceExhausted;
  ServerSetup setup;
  setup.store = faulty;
  START_OR_FAIL(server, std::move(setup));
  const Reply reply = server->Call(Req(), "k1");
  EXPECT_EQ(reply.status.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(reply.Trailing("idem-problem"), "idempotency_store_full");
  EXPECT_EQ(reply.Trailing("retry-after"), "1");
  // Not a status a retry policy retries: no pushback.
  EXPECT_EQ(reply.Trailing("grpc-retry-pushback-ms"), "");
  EXPECT_EQ(server->runs(), 0);
}

TEST_P(GrpcAdapterTest, ADamagedRecordIsDataLoss) {
  auto faulty = FaultyMemory();
  faulty->fail_claim = ErrorCode::kDataLoss;
  ServerSetup setup;
  setup.store = faulty;
  START_OR_FAIL(server, std::move(setup));
  const Reply reply = server->Call(Req(), "k1");
  EXPECT_EQ(reply.status.error_code(), StatusCode::DATA_LOSS);
  EXPECT_EQ(reply.Trailing("idem-problem"), "idempotency_record_damaged");
  EXPECT_EQ(server->runs(), 0);
}

// A completed record under the call's key whose response is not a stored
// gRPC call (an HTTP route's, a broken one) is never replayed as garbage.
TEST_P(GrpcAdapterTest, ARecordThatIsNotAStoredCallIsDataLossNotAReplay) {
  LogLines logs;
  ServerSetup setup;
  setup.log = logs.Sink();
  START_OR_FAIL(server, std::move(setup));
  // The same request as the Guard sees it, completed with a foreign body.
  const CreateOrderRequest request = Req();
  std::string body;
  ASSERT_TRUE(request.SerializeToString(&body));
  const HeaderView headers[] = {{"idempotency-key", "k1"}};
  GuardOptions route = server->guard().options();
  route.stored_statuses.Add(600);
  Decision d = server->guard().Begin(RequestView{.method = "POST",
                                                 .target = kCreateOrder,
                                                 .route = kCreateOrder,
                                                 .headers = headers,
                                                 .body = body},
                                     *Guard::MakeRouteOptions(route));
  ASSERT_EQ(d.action, Action::kExecute);
  ASSERT_EQ(d.claim.Finish(Response{600, {}, "not a gRPC call"}),
            FinishResult::kStored);

  const Reply reply = server->Call(request, "k1");
  EXPECT_EQ(reply.status.error_code(), StatusCode::DATA_LOSS);
  EXPECT_EQ(reply.Trailing("idem-problem"), "idempotency_record_damaged");
  EXPECT_EQ(reply.Trailing("idempotent-replayed"), "");
  EXPECT_TRUE(reply.order.id().empty());
  EXPECT_EQ(server->runs(), 0);
  bool logged = false;
  for (const std::string& line : logs.lines()) {
    if (line.find("does not decode") != std::string::npos) logged = true;
  }
  EXPECT_TRUE(logged);
}

TEST_P(GrpcAdapterTest, SwitchedOffEveryCallRunsUnprotected) {
  START_OR_FAIL(server, {});
  server->guard().SetEnabled(false);
  EXPECT_EQ(server->Call(Req(), "k1").order.id(), "order-1");
  const Reply second = server->Call(Req(), "k1");
  EXPECT_EQ(second.order.id(), "order-2");
  EXPECT_EQ(second.Trailing("idempotent-replayed"), "");
  server->guard().SetEnabled(true);
  EXPECT_EQ(server->Call(Req(), "k1").order.id(), "order-3");
  EXPECT_EQ(server->Call(Req(), "k1").order.id(), "order-3");
}

TEST_P(GrpcAdapterTest, AFailOpenMethodRunsUnprotectedWhenTheStoreIsDown) {
  ServerSetup setup;
  setup.store = std::make_shared<testing::DownStore>();
  GuardOptions fail_open;
  fail_open.on_store_error = StoreErrorPolicy::kFailOpen;
  setup.method.guard = fail_open;
  START_OR_FAIL(server, std::move(setup));
  const Reply reply = server->Call(Req(), "k1");
  EXPECT_TRUE(reply.status.ok()) << reply.status.error_message();
  EXPECT_EQ(server->runs(), 1);
  EXPECT_EQ(server->guard().metrics().Get(Outcome::kFailOpen), 1u);
}

TEST_P(GrpcAdapterTest, AResultOverMaxStoredResponseIsSentUnstored) {
  ServerSetup setup;
  setup.guard_options.max_stored_response = 16;
  START_OR_FAIL(server, std::move(setup));
  const Reply first = server->Call(Req("a long item name"), "k1");
  ASSERT_TRUE(first.status.ok());
  EXPECT_EQ(first.order.item(), "a long item name");
  EXPECT_EQ(server->Call(Req("a long item name"), "k1").order.id(), "order-2");
  EXPECT_EQ(server->guard().metrics().Get(Outcome::kNotStored), 2u);
}

// The HTTP rule for a lock that timed out: a retry takes the key over and
// runs; the late first call's result is sent but not stored; later retries
// replay the takeover's.
TEST_P(GrpcAdapterTest, ALockThatTimedOutIsTakenOverAndTheLateResultDropped) {
  ServerSetup setup;
  setup.guard_options.lock_timeout = std::chrono::seconds(10);
  START_OR_FAIL(server, std::move(setup));
  server->gate().Close();
  Reply first;
  Reply second;
  std::thread a([&] { first = server->Call(Req(), "k1"); });
  ASSERT_TRUE(server->gate().WaitHeld(1));
  server->manual_clock()->Advance(std::chrono::seconds(11));
  std::thread b([&] { second = server->Call(Req(), "k1"); });
  ASSERT_TRUE(server->gate().WaitHeld(2));  // The takeover runs too.
  server->gate().Open();
  a.join();
  b.join();
  EXPECT_EQ(first.order.id(), "order-1");
  EXPECT_EQ(second.order.id(), "order-2");
  const Reply third = server->Call(Req(), "k1");
  EXPECT_EQ(third.order.id(), "order-2");
  EXPECT_EQ(third.Trailing("idempotent-replayed"), "true");
  EXPECT_EQ(server->runs(), 2);
  EXPECT_EQ(server->guard().metrics().Get(Outcome::kTakeover), 1u);
  EXPECT_EQ(server->guard().metrics().Get(Outcome::kStaleComplete), 1u);
}

TEST_P(GrpcAdapterTest, KeysAreNeverLogged) {
  const std::string key = "key-7f3a9c-do-not-log";
  LogLines logs;
  {
    auto faulty = FaultyMemory();
    ServerSetup setup;
    setup.store = faulty;
    setup.log = logs.Sink();
    START_OR_FAIL(server, std::move(setup));
    server->Call(Req(), key);                // Executed.
    server->Call(Req(), key);                // Replayed.
    server->Call(Req("other"), key);         // Reused.
    server->Call(Req("throw"), key + "-t");  // The handler fails.
    server->Call(Req(), CallOptions{.keys = {"\"" + key}});  // Invalid.
    faulty->fail_complete = ErrorCode::kUnavailable;
    server->Call(Req(), key + "-c");  // Not stored: logged.
    faulty->fail_complete.store(std::nullopt);
    faulty->fail_claim = ErrorCode::kDataLoss;
    server->Call(Req(), key + "-d");  // Damaged.
  }
  const std::vector<std::string> lines = logs.lines();
  EXPECT_GE(lines.size(), 2u);  // The failures above are logged...
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find("key-7f3a9c"), std::string::npos)
        << line;  // ...keyless.
  }
}

INSTANTIATE_TEST_SUITE_P(Apis, GrpcAdapterTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Sync" : "Callback";
                         });

}  // namespace
}  // namespace idem::grpc_test
