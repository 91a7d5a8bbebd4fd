// The idem-grpc-demo binary as a client sees it: a real process
// (IDEM_GRPC_DEMO_PATH, set by CMake) on 127.0.0.1 port 0 and a real gRPC
// client (demo_client.h). The contract of docs/GRPC.md on one process: a
// first call and its replay with `idempotent-replayed: true`, another
// request under the same key, a missing key, scopes, a deadline that
// expires while the handler runs, released and stored error statuses, a
// burst of one key, keys never in the process's output, its flags, exit
// statuses and SIGTERM.
//
// Stores are memory: or a file in the test's own directory; waits are
// bounded with generous deadlines (sanitizers on a loaded two-core machine).

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "demo_client.h"
#include "support/built_path.h"
#include "support/demo_process.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace idem::testing::grpc_demo {
namespace {

using ::grpc::StatusCode;
using proc::DemoProcess;
using proc::ReadFile;

class GrpcDemoTest : public ::testing::Test {
 protected:
  // Starts idem-grpc-demo on `store` with `args`; its port (0 when it did
  // not say it listens: see Log()).
  std::uint16_t Start(std::vector<std::string> args = {},
                      const std::string& store = "memory:") {
    demo_.emplace(::idem::testing::BuiltPath(IDEM_GRPC_DEMO_PATH), store, log(),
                  args);
    return demo_->WaitListening();
  }
  std::filesystem::path log() const { return dir_.path() / "demo.log"; }
  std::string Log() const { return ReadFile(log()); }

  TempDir dir_;
  std::optional<DemoProcess> demo_;
};

TEST_F(GrpcDemoTest, FirstCallReplayMismatchAndMissingKey) {
  const std::uint16_t port = Start({"--instance", "g1"});
  ASSERT_NE(port, 0) << Log();
  DemoClient client(port);

  const CallResult first =
      client.CreateOrder(OrderRequest("book", 2), {.key = "k-1"});
  ASSERT_TRUE(first.status.ok()) << Describe(first);
  EXPECT_FALSE(first.replayed()) << Describe(first);
  EXPECT_EQ(first.order.item(), "book");
  EXPECT_EQ(first.order.quantity(), 2);
  EXPECT_EQ(first.order.instance(), "g1");
  EXPECT_TRUE(first.order.id().starts_with("g1-")) << first.order.id();

  const CallResult replay =
      client.CreateOrder(OrderRequest("book", 2), {.key = "k-1"});
  ASSERT_TRUE(replay.status.ok()) << Describe(replay);
  EXPECT_TRUE(replay.replayed()) << Describe(replay);
  EXPECT_EQ(replay.order.SerializeAsString(), first.order.SerializeAsString());

  // Same key, another request: FAILED_PRECONDITION, idempotency_key_reused.
  const CallResult other =
      client.CreateOrder(OrderRequest("book", 3), {.key = "k-1"});
  EXPECT_EQ(other.status.error_code(), StatusCode::FAILED_PRECONDITION)
      << Describe(other);
  EXPECT_EQ(other.Trailer("idem-problem"), "idempotency_key_reused")
      << Describe(other);
  EXPECT_FALSE(other.replayed());

  // No key on a key-required method: INVALID_ARGUMENT, the handler not run.
  const CallResult keyless = client.CreateOrder(OrderRequest("book"), {});
  EXPECT_EQ(keyless.status.error_code(), StatusCode::INVALID_ARGUMENT)
      << Describe(keyless);
  EXPECT_EQ(keyless.Trailer("idem-problem"), "idempotency_key_missing")
      << Describe(keyless);

  // An invalid key (an unterminated sf-string): the same status.
  const CallResult invalid =
      client.CreateOrder(OrderRequest("book"), {.key = "\"unterminated"});
  EXPECT_EQ(invalid.status.error_code(), StatusCode::INVALID_ARGUMENT)
      << Describe(invalid);
  EXPECT_EQ(invalid.Trailer("idem-problem"), "idempotency_key_invalid")
      << Describe(invalid);

  EXPECT_EQ(client.HandlerRuns(), 1);
  demo_->Signal(SIGTERM);
  EXPECT_EQ(demo_->Wait(), 0) << Log();
}

TEST_F(GrpcDemoTest, ABearerTokenIsTheScopeAndNoneIsOneSharedScope) {
  const std::uint16_t port = Start();
  ASSERT_NE(port, 0) << Log();
  DemoClient client(port);
  const auto request = OrderRequest("pen");
  const CallResult alice =
      client.CreateOrder(request, {.key = "shared", .bearer = "alice"});
  const CallResult bob =
      client.CreateOrder(request, {.key = "shared", .bearer = "bob"});
  const CallResult anonymous = client.CreateOrder(request, {.key = "shared"});
  for (const CallResult* r : {&alice, &bob, &anonymous}) {
    ASSERT_TRUE(r->status.ok()) << Describe(*r);
    EXPECT_FALSE(r->replayed()) << Describe(*r);
  }
  EXPECT_NE(alice.order.id(), bob.order.id());
  EXPECT_NE(alice.order.id(), anonymous.order.id());
  EXPECT_NE(bob.order.id(), anonymous.order.id());
  // Each scope replays its own.
  const CallResult alice_again =
      client.CreateOrder(request, {.key = "shared", .bearer = "alice"});
  EXPECT_TRUE(alice_again.replayed()) << Describe(alice_again);
  EXPECT_EQ(alice_again.order.id(), alice.order.id());
  const CallResult anonymous_again =
      client.CreateOrder(request, {.key = "shared"});
  EXPECT_TRUE(anonymous_again.replayed()) << Describe(anonymous_again);
  EXPECT_EQ(anonymous_again.order.id(), anonymous.order.id());
  EXPECT_EQ(client.HandlerRuns(), 3);
}

// The client's deadline passes while the handler waits (delay_ms): the
// handler's result is stored all the same, and the retry replays it.
TEST_F(GrpcDemoTest, ADeadlineThatExpiresMidHandlerThenARetryThatReplays) {
  const std::uint16_t port = Start();
  ASSERT_NE(port, 0) << Log();
  DemoClient client(port);
  // A deadline of 1 s, so that a loaded machine (sanitizers) still
  // reaches the handler before it passes; the handler takes 4 s.
  const auto request = OrderRequest("slow", 1, /*delay_ms=*/4000);
  const CallResult expired = client.CreateOrder(
      request, {.key = "late", .deadline = std::chrono::seconds(1)});
  EXPECT_EQ(expired.status.error_code(), StatusCode::DEADLINE_EXCEEDED)
      << Describe(expired);

  // While the handler still runs a retry is ABORTED (in progress, with a
  // retry-after); once it returned, the retry replays.
  std::optional<CallResult> retry;
  int in_progress = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        retry = client.CreateOrder(request, {.key = "late"});
        if (retry->status.error_code() != StatusCode::ABORTED) return true;
        EXPECT_EQ(retry->Trailer("idem-problem"),
                  "idempotency_request_in_progress")
            << Describe(*retry);
        EXPECT_FALSE(retry->Trailer("retry-after").empty()) << Describe(*retry);
        ++in_progress;
        return false;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100)));
  ASSERT_TRUE(retry->status.ok()) << Describe(*retry);
  EXPECT_TRUE(retry->replayed()) << Describe(*retry);
  EXPECT_EQ(retry->order.item(), "slow");
  EXPECT_EQ(client.HandlerRuns(), 1) << in_progress << " in-progress answers";
}

// UNAVAILABLE is released (the next retry runs the handler again);
// NOT_FOUND is stored (replayed, with its message).
TEST_F(GrpcDemoTest, ReleasedAndStoredErrorStatuses) {
  const std::uint16_t port = Start();
  ASSERT_NE(port, 0) << Log();
  DemoClient client(port);

  const auto unavailable = OrderRequest("x", 1, 0, /*fail_with=*/14);
  for (int i = 0; i < 2; ++i) {
    const CallResult r = client.CreateOrder(unavailable, {.key = "released"});
    EXPECT_EQ(r.status.error_code(), StatusCode::UNAVAILABLE) << Describe(r);
    EXPECT_EQ(r.status.error_message(), "handler failed");
    EXPECT_FALSE(r.replayed()) << Describe(r);
  }
  EXPECT_EQ(client.HandlerRuns(), 2);

  const auto not_found = OrderRequest("x", 1, 0, /*fail_with=*/5);
  const CallResult first = client.CreateOrder(not_found, {.key = "stored"});
  EXPECT_EQ(first.status.error_code(), StatusCode::NOT_FOUND)
      << Describe(first);
  EXPECT_FALSE(first.replayed());
  const CallResult again = client.CreateOrder(not_found, {.key = "stored"});
  EXPECT_EQ(again.status.error_code(), StatusCode::NOT_FOUND)
      << Describe(again);
  EXPECT_EQ(again.status.error_message(), "handler failed");
  EXPECT_TRUE(again.replayed()) << Describe(again);
  EXPECT_EQ(client.HandlerRuns(), 3);
}

// 50 calls with one key at once on one process: the handler runs once,
// every other call is a replay of its order or ABORTED (in progress).
TEST_F(GrpcDemoTest, ABurstOfOneKeyRunsTheHandlerOnce) {
  const std::uint16_t port =
      Start({}, "sqlite:" + (dir_.path() / "b.db").string());
  ASSERT_NE(port, 0) << Log();
  DemoClient client(port);
  constexpr int kCalls = 50;
  std::vector<CallResult> answers(kCalls);
  {
    std::latch go(kCalls);
    std::vector<std::thread> threads;
    for (int i = 0; i < kCalls; ++i) {
      threads.emplace_back([&, i] {
        go.arrive_and_wait();
        answers[i] =
            client.CreateOrder(OrderRequest("burst", 1, 300), {.key = "b"});
      });
    }
    for (auto& t : threads) t.join();
  }
  int originals = 0;
  std::string id;
  for (const CallResult& r : answers) {
    if (r.status.error_code() == StatusCode::ABORTED) {
      EXPECT_EQ(r.Trailer("idem-problem"), "idempotency_request_in_progress")
          << Describe(r);
      continue;
    }
    ASSERT_TRUE(r.status.ok()) << Describe(r);
    if (!r.replayed()) ++originals;
    if (id.empty()) id = r.order.id();
    EXPECT_EQ(r.order.id(), id) << Describe(r);
  }
  EXPECT_EQ(originals, 1);
  EXPECT_EQ(client.HandlerRuns(), 1);
}

// A key (valid or not) is never written to the process's output, whatever
// the call's outcome.
TEST_F(GrpcDemoTest, KeysNeverReachTheProcesssOutput) {
  const std::uint16_t port = Start({"--lock-timeout", "0.5"},
                                   "sqlite:" + (dir_.path() / "k.db").string());
  ASSERT_NE(port, 0) << Log();
  DemoClient client(port);
  const std::string secret = "Sekr1t-k3y-8c1f";
  client.CreateOrder(OrderRequest("a"), {.key = secret});
  client.CreateOrder(OrderRequest("a"), {.key = secret});
  client.CreateOrder(OrderRequest("b"), {.key = secret});         // 422
  client.CreateOrder(OrderRequest("a"), {.key = "\"" + secret});  // invalid
  client.CreateOrder(OrderRequest("c", 1, 0, 14), {.key = secret + "2"});
  client.CreateOrder(OrderRequest("d", 1, 1200), {.key = secret + "3"});
  client.CreateOrder(OrderRequest("d", 1, 0), {.key = secret + "3"});
  demo_->Signal(SIGTERM);
  EXPECT_EQ(demo_->Wait(), 0) << Log();
  const std::string output = Log() + demo_->RestOfStdout();
  EXPECT_EQ(output.find(secret), std::string::npos) << output;
  EXPECT_EQ(output.find("Sekr1t"), std::string::npos) << output;
}

#ifdef IDEM_GRPC_DEMO_TEST_POSTGRES
// The same on a store that is down (a lazy PostgreSQL store on a port where
// nothing listens): every call is UNAVAILABLE and logged, never with its key.
TEST_F(GrpcDemoTest, KeysNeverReachTheLogOfAStoreThatIsDown) {
  const std::uint16_t port =
      Start({}, "postgresql://idem@127.0.0.1:1/idem?connect=lazy");
  ASSERT_NE(port, 0) << Log();
  DemoClient client(port);
  const std::string secret = "Sekr1t-k3y-down";
  for (int i = 0; i < 3; ++i) {
    const CallResult r = client.CreateOrder(
        OrderRequest("a"), {.key = secret + std::to_string(i)});
    EXPECT_EQ(r.status.error_code(), StatusCode::UNAVAILABLE) << Describe(r);
    EXPECT_EQ(r.Trailer("idem-problem"), "idempotency_store_unavailable")
        << Describe(r);
  }
  EXPECT_EQ(client.HandlerRuns(), 0);
  demo_->Signal(SIGTERM);
  EXPECT_EQ(demo_->Wait(), 0) << Log();
  const std::string output = Log() + demo_->RestOfStdout();
  EXPECT_NE(output.find("idempotency store failed"), std::string::npos)
      << output;
  EXPECT_EQ(output.find("Sekr1t"), std::string::npos) << output;
}
#endif

TEST_F(GrpcDemoTest, WithoutIdemTheSameServiceTakesNoKey) {
  const std::uint16_t port = Start({"--no-idem"});
  ASSERT_NE(port, 0) << Log();
  DemoClient client(port);
  const CallResult a = client.CreateOrder(OrderRequest("n"), {});
  const CallResult b = client.CreateOrder(OrderRequest("n"), {.key = "same"});
  const CallResult c = client.CreateOrder(OrderRequest("n"), {.key = "same"});
  for (const CallResult* r : {&a, &b, &c}) {
    ASSERT_TRUE(r->status.ok()) << Describe(*r);
    EXPECT_FALSE(r->replayed());
  }
  EXPECT_NE(b.order.id(), c.order.id());
  EXPECT_EQ(client.HandlerRuns(), 3);
  demo_->Signal(SIGTERM);
  EXPECT_EQ(demo_->Wait(), 0) << Log();
}

struct BadFlag {
  std::vector<std::string> args;
  std::string named;  // What the message must name.
};

TEST_F(GrpcDemoTest, BadFlagsExitTwoNamingTheFlag) {
  const std::vector<BadFlag> cases = {
      {{"--listen", "nowhere"}, "--listen"},
      {{"--listen", "127.0.0.1:65536"}, "--listen"},
      {{"--ttl", "0"}, "--ttl"},
      {{"--ttl", "99999999999999999999"}, "--ttl"},
      {{"--lock-timeout", "-1"}, "--lock-timeout"},
      {{"--lock-wait", "3600001"}, "--lock-wait"},
      {{"--lock-renewal", "5", "--lock-timeout", "1"}, "--lock-renewal"},
      {{"--threads", "0"}, "--threads"},
      {{"--threads", "many"}, "--threads"},
      {{"--instance", ""}, "--instance"},
      {{"--bogus"}, "--bogus"},
  };
  for (const BadFlag& c : cases) {
    const proc::ProgramRun run = proc::RunProgram(
        ::idem::testing::BuiltPath(IDEM_GRPC_DEMO_PATH), c.args, dir_.path());
    SCOPED_TRACE(c.args.front() + " " + c.args.back());
    EXPECT_EQ(run.exit_status, 2) << run.err;
    EXPECT_NE(run.err.find(c.named), std::string::npos) << run.err;
    EXPECT_EQ(run.out.find("listening on"), std::string::npos) << run.out;
  }
  const proc::ProgramRun version =
      proc::RunProgram(::idem::testing::BuiltPath(IDEM_GRPC_DEMO_PATH),
                       {"--version"}, dir_.path());
  EXPECT_EQ(version.exit_status, 0);
  EXPECT_TRUE(version.out.starts_with("idem-grpc-demo 0.")) << version.out;
}

// The default store is ./var/idem-grpc of the working directory: a second
// demo there fails at start (exit 1) saying what to do.
TEST_F(GrpcDemoTest, TheDefaultStoreIsRocksdbInTheWorkingDirectory) {
  DemoProcess first(::idem::testing::BuiltPath(IDEM_GRPC_DEMO_PATH),
                    "rocksdb:" + (dir_.path() / "var" / "idem-grpc").string(),
                    log());
  ASSERT_NE(first.WaitListening(), 0) << Log();
  const proc::ProgramRun second =
      proc::RunProgram(::idem::testing::BuiltPath(IDEM_GRPC_DEMO_PATH),
                       {"--listen", "127.0.0.1:0"}, dir_.path(), dir_.path());
  EXPECT_EQ(second.exit_status, 1) << second.err;
  EXPECT_NE(second.err.find("another idem-grpc-demo"), std::string::npos)
      << second.err;
}

}  // namespace
}  // namespace idem::testing::grpc_demo
