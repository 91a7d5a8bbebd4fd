// The PostgreSQL store through a server outage. Each test starts a server
// of its own (PrivatePostgres: scripts/postgres.sh with a private state
// file, so stopping it disturbs no other test), stops it mid-run and starts
// it again on the same data directory and port:
//  - every call during the outage fails with kUnavailable, each within
//    generous bounds of its timeouts (never a hang);
//  - after the restart the same store objects work again, including one
//    whose pooled connections the server closed while they sat idle, and
//    no completed record is lost;
//  - a server that stops answering altogether (SIGSTOP) costs a call at
//    most its client-side deadline or connect_timeout;
//  - through the Guard, fail-closed answers 503 problems during the outage
//    and fail-open runs the handler unprotected and leaves the store alone
//    for store_backoff (a ManualClock moves time).
//
// Real time is only waited for in the script's bounded polling for the
// server to start and stop.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/open_store.h"
#include "idem/problem.h"
#include "idem/store.h"
#ifdef IDEM_HAVE_HTTP_TESTS
#include "http_test_util.h"
#endif
#include "postgres_test_util.h"
#include "support/built_path.h"
#include "support/demo_process.h"
#include "support/fail_open_outage.h"
#include "support/faulty_store.h"
#include "support/guard_client.h"
#include "support/private_server_test.h"
#include "support/store_times.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

using testing::kLock;
using testing::kT0;
using testing::kTtl;
// Far beyond what any one call may take with the timeouts below (connect
// 2 s, statement 2 s + 2 s grace, acquire 2 s), sanitizers included.
constexpr auto kCallBound = seconds(30);
// Short timeouts, so an outage shows quickly.
constexpr char kParams[] =
    "table=outage&pool=4&connect_timeout_s=2&statement_timeout_ms=2000&"
    "acquire_timeout_ms=2000";

RecordId Id(std::uint8_t n) {
  RecordId id;
  id.bytes.fill(n);
  id.bytes[0] = 0xA5;
  return id;
}

Fingerprint Fp(std::uint8_t n) {
  Fingerprint fp;
  fp.bytes.fill(n);
  return fp;
}

Response Created(std::string body) {
  return Response{201, {{"Content-Type", "text/plain"}}, std::move(body)};
}

// Runs `call`, checks that it failed with kUnavailable within kCallBound.
template <typename Call>
void ExpectUnavailable(std::string_view what, Call&& call) {
  SCOPED_TRACE(what);
  const auto start = std::chrono::steady_clock::now();
  auto result = call();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kCallBound);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code(), ErrorCode::kUnavailable)
      << result.error().ToString();
  EXPECT_THAT(result.error().message(), HasSubstr("postgresql://"));
}

class PostgresOutageTest
    : public testing::PrivateServerTest<testing::PrivatePostgres> {
 protected:
  PostgresOutageTest() : PrivateServerTest("PostgreSQL server") {}

  std::shared_ptr<Store> Open() {
    return OpenOn(server_.url() + "?" + kParams);
  }
};

TEST_F(PostgresOutageTest, CallsFailUnavailableDuringAnOutageAndRecoverAfter) {
  std::shared_ptr<Store> store = Open();
  // A second store, idle through the outage: its pooled connection is
  // closed by the stopping server while nobody uses it.
  std::shared_ptr<Store> idle = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_NE(idle, nullptr);
  constexpr int kCompleted = 20;
  for (int i = 0; i < kCompleted; ++i) {
    auto claim = store->Claim(Id(i), Fp(i), kT0, kTtl, kLock);
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    auto done =
        store->Complete(Id(i), claim->token, Created("r" + std::to_string(i)));
    ASSERT_TRUE(done.has_value() && *done);
  }
  auto held = store->Claim(Id(100), Fp(100), kT0, kTtl, kLock);
  ASSERT_TRUE(held.has_value());
  ASSERT_EQ(held->outcome, ClaimOutcome::kAcquired);

  ASSERT_TRUE(server_.Pause()) << server_.error();

  // Twice each: the first finds the pooled connections dead, the second
  // cannot open a new one.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    ExpectUnavailable("claim new", [&] {
      return store->Claim(Id(200), Fp(200), kT0, kTtl, kLock);
    });
    ExpectUnavailable("claim completed", [&] {
      return store->Claim(Id(0), Fp(0), kT0, kTtl, kLock);
    });
    ExpectUnavailable("complete", [&] {
      return store->Complete(Id(100), held->token, Created("held"));
    });
    ExpectUnavailable("release",
                      [&] { return store->Release(Id(100), Token{}); });
    ExpectUnavailable("inspect", [&] { return store->Inspect(Id(0), kT0); });
    ExpectUnavailable("purge",
                      [&] { return store->PurgeExpired(kT0 + kTtl, 10); });
  }

  ASSERT_TRUE(server_.Resume()) << server_.error();

  // The same objects work again at once.
  for (Store* s : {idle.get(), store.get()}) {
    auto inspect = s->Inspect(Id(0), kT0);
    ASSERT_TRUE(inspect.has_value()) << inspect.error().ToString();
    ASSERT_TRUE(inspect->has_value());
  }
  for (int i = 0; i < kCompleted; ++i) {
    auto replay = idle->Claim(Id(i), Fp(i), kT0, kTtl, kLock);
    ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
    ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted) << i;
    EXPECT_EQ(replay->response->body, "r" + std::to_string(i));
  }
  // The claim made before the outage still holds and can be completed.
  auto again = store->Claim(Id(100), Fp(100), kT0, kTtl, kLock);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->outcome, ClaimOutcome::kInProgress);
  auto done = store->Complete(Id(100), held->token, Created("held"));
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
  auto fresh = store->Claim(Id(200), Fp(200), kT0, kTtl, kLock);
  ASSERT_TRUE(fresh.has_value()) << fresh.error().ToString();
  EXPECT_EQ(fresh->outcome, ClaimOutcome::kAcquired);
}

// A server that stops answering (a dropped network, a hung host): neither
// the server's statement_timeout nor the kernel can end the wait, so the
// client-side deadline (statement_timeout + kClientGrace) and libpq's
// connect_timeout do.
TEST_F(PostgresOutageTest, ASilentServerIsUnavailableWithinTheDeadlines) {
  auto store =
      OpenStore(server_.url() +
                    "?table=silent&connect_timeout_s=2&"
                    "statement_timeout_ms=1000&acquire_timeout_ms=2000",
                {.sweep_interval = Duration::zero()});
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  auto claim = (*store)->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();

  ASSERT_TRUE(server_.Freeze()) << server_.error();
  // On the pooled connection: the client-side deadline.
  auto start = std::chrono::steady_clock::now();
  auto silent = (*store)->Claim(Id(2), Fp(2), kT0, kTtl, kLock);
  auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(1000));
  EXPECT_LT(waited, kCallBound);
  ASSERT_FALSE(silent.has_value());
  EXPECT_EQ(silent.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(silent.error().message(), HasSubstr("no reply within"));
  // On a new connection: connect_timeout.
  start = std::chrono::steady_clock::now();
  silent = (*store)->Claim(Id(2), Fp(2), kT0, kTtl, kLock);
  EXPECT_LT(std::chrono::steady_clock::now() - start, kCallBound);
  ASSERT_FALSE(silent.has_value());
  EXPECT_EQ(silent.error().code(), ErrorCode::kUnavailable)
      << silent.error().ToString();
  ASSERT_TRUE(server_.Thaw()) << server_.error();

  // The first silent claim may have been written before the freeze took
  // the reply away; either way the store answers again.
  auto again = (*store)->Claim(Id(2), Fp(2), kT0, kTtl, kLock);
  ASSERT_TRUE(again.has_value()) << again.error().ToString();
  auto done = (*store)->Complete(Id(1), claim->token, Created("after"));
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
}

TEST_F(PostgresOutageTest, FailClosedGuardAnswers503DuringTheOutage) {
  std::shared_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  GuardSetup setup;
  setup.store = store;
  setup.clock = std::make_shared<ManualClock>(kT0);
  auto guard = Guard::Create(std::move(setup));
  ASSERT_TRUE(guard.has_value()) << guard.error().ToString();
  testing::GuardClient client{guard->get()};
  EXPECT_EQ(client.Send("before").status, 201);

  ASSERT_TRUE(server_.Pause()) << server_.error();
  for (const char* key : {"before", "during"}) {
    const auto start = std::chrono::steady_clock::now();
    const Response r = client.Send(key);
    EXPECT_LT(std::chrono::steady_clock::now() - start, kCallBound);
    EXPECT_EQ(r.status, 503) << key;
    EXPECT_EQ(r.FindHeader("Content-Type"), "application/problem+json");
    EXPECT_THAT(r.body, HasSubstr(problem_code::kStoreUnavailable));
    EXPECT_TRUE(r.FindHeader("Retry-After").has_value());
  }
  EXPECT_EQ(client.runs, 1);
  EXPECT_EQ((*guard)->metrics().Get(Outcome::kStoreError), 2u);

  ASSERT_TRUE(server_.Resume()) << server_.error();
  const Response replay = client.Send("before");
  EXPECT_EQ(replay.status, 201);
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(client.Send("during").status, 201);
  EXPECT_EQ(client.runs, 2);
}

TEST_F(PostgresOutageTest, FailOpenGuardRunsUnprotectedAndBacksOff) {
  std::shared_ptr<Store> postgres = Open();
  ASSERT_NE(postgres, nullptr);
  testing::FailOpenGuard open(postgres, kT0, seconds(10));
  ASSERT_NE(open.guard, nullptr) << open.error;
  testing::GuardClient client{open.guard.get()};
  ASSERT_NO_FATAL_FAILURE(testing::ExpectFailOpenOutage(
      open, client, kCallBound,
      [&] { ASSERT_TRUE(server_.Pause()) << server_.error(); },
      [&] { ASSERT_TRUE(server_.Resume()) << server_.error(); }));
  // The record completed before the outage is still there.
  EXPECT_EQ(client.Send("before").FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(client.runs, 4);
}

// ---- connect=lazy: a store that starts while its server is down ----------

constexpr char kLazyParams[] =
    "table=lazy&pool=4&connect_timeout_s=2&statement_timeout_ms=2000&"
    "acquire_timeout_ms=2000&connect=lazy";

// Until its first connection, a lazy store fails every call at once.
void ExpectNotConnected(Store& store, std::string_view why) {
  SCOPED_TRACE(why);
  auto check = [&](std::string_view what, auto&& call) {
    SCOPED_TRACE(what);
    const auto start = std::chrono::steady_clock::now();
    auto result = call();
    // At once: no connect_timeout waited (generous for a loaded machine).
    EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(2));
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code(), ErrorCode::kUnavailable);
    EXPECT_THAT(result.error().message(), HasSubstr("connect=lazy"));
    EXPECT_THAT(result.error().message(), HasSubstr(why));
  };
  check("claim", [&] { return store.Claim(Id(1), Fp(1), kT0, kTtl, kLock); });
  check("complete",
        [&] { return store.Complete(Id(1), Token{}, Created("x")); });
  check("release", [&] { return store.Release(Id(1), Token{}); });
  check("revoke", [&] { return store.Revoke(Id(1)); });
  check("extend", [&] { return store.ExtendLock(Id(1), Token{}, kT0, kLock); });
  check("inspect", [&] { return store.Inspect(Id(1), kT0); });
  check("stats", [&] { return store.Stats(kT0); });
  check("purge", [&] { return store.PurgeExpired(kT0, 10); });
}

// Whether the store answers a call (the lazy store has connected).
bool Serves(Store& store) { return store.Inspect(Id(9), kT0).has_value(); }

TEST_F(PostgresOutageTest, ALazyStoreOpensWhileTheServerIsDownAndServesAfter) {
  ASSERT_TRUE(server_.Pause()) << server_.error();
  testing::SyncLog log;
  auto opened =
      OpenStore(server_.url() + "?" + kLazyParams,
                {.sweep_interval = Duration::zero(), .log = log.Sink()});
  ASSERT_TRUE(opened.has_value()) << opened.error().ToString();
  Store& store = **opened;
  EXPECT_EQ(store.Info().max_concurrent_calls, 4u);
  EXPECT_EQ(store.Info().name, "postgres");
  // The first attempt failed (the server is down): said once, with why.
  ASSERT_TRUE(testing::WaitFor([&] {
    return log.Count("cannot connect yet (connect=lazy)") > 0;
  })) << log.All();
  ExpectNotConnected(store, "retrying in the background");

  ASSERT_TRUE(server_.Resume()) << server_.error();
  // Within the back-off's cap (5 s) plus a connect, generously.
  ASSERT_TRUE(
      testing::WaitFor([&] { return Serves(store); }, std::chrono::seconds(60)))
      << log.All();
  auto claim = store.Claim(Id(1), Fp(1), kT0, kTtl, kLock);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  auto done = store.Complete(Id(1), claim->token, Created("after"));
  ASSERT_TRUE(done.has_value() && *done);
  auto replay = store.Claim(Id(1), Fp(1), kT0, kTtl, kLock);
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  // The table was created at the first connection.
  EXPECT_EQ(testing::PostgresQuery(server_.url(),
                                   "SELECT version FROM idem_schema_versions "
                                   "WHERE table_name = 'lazy'"),
            (std::vector<std::vector<std::string>>{{"1"}}));
  // One episode: one warning however many retries (at least two attempts:
  // the first while the server was down), one line when it ended.
  EXPECT_EQ(log.Count("cannot connect yet"), 1) << log.All();
  EXPECT_EQ(log.Count("info: "), 1) << log.All();
  EXPECT_EQ(log.Count("error: "), 0) << log.All();
  EXPECT_THAT(log.All(), ::testing::ContainsRegex(
                             "connected after ([2-9]|[1-9][0-9]+) attempts"));
}

// Through the Guard: fail-closed answers 503 until the store connects,
// fail-open runs the handler unprotected; then both are protected.
TEST_F(PostgresOutageTest, ALazyStoreBehindAGuardIs503OrUnprotectedUntilUp) {
  ASSERT_TRUE(server_.Pause()) << server_.error();
  std::shared_ptr<Store> store = OpenOn(server_.url() + "?" + kLazyParams);
  ASSERT_NE(store, nullptr);
  GuardSetup setup;
  setup.store = store;
  setup.clock = std::make_shared<ManualClock>(kT0);
  auto closed = Guard::Create(std::move(setup));
  ASSERT_TRUE(closed.has_value()) << closed.error().ToString();
  testing::GuardClient client{closed->get()};
  testing::FailOpenGuard open(store, kT0, seconds(10));
  ASSERT_NE(open.guard, nullptr) << open.error;
  testing::GuardClient open_client{open.guard.get()};

  const Response refused = client.Send("k1");
  EXPECT_EQ(refused.status, 503);
  EXPECT_THAT(refused.body, HasSubstr(problem_code::kStoreUnavailable));
  EXPECT_EQ(client.runs, 0);
  EXPECT_EQ(open_client.Send("k2").status, 201);
  EXPECT_EQ(open_client.runs, 1);
  EXPECT_EQ(open.guard->metrics().Get(Outcome::kFailOpen), 1u);

  ASSERT_TRUE(server_.Resume()) << server_.error();
  ASSERT_TRUE(testing::WaitFor([&] { return Serves(*store); }, seconds(60)));
  EXPECT_EQ(client.Send("k1").status, 201);
  const Response replay = client.Send("k1");
  EXPECT_EQ(replay.FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(client.runs, 1);
  // Fail-open is protected again after its back-off.
  open.clock->Advance(seconds(10));
  EXPECT_EQ(open_client.Send("k3").status, 201);
  EXPECT_EQ(open_client.Send("k3").FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(open_client.runs, 2);
}

}  // namespace
}  // namespace idem

#ifdef IDEM_HAVE_HTTP_TESTS
namespace idem {
namespace {

// idem-demo on a PostgreSQL store with its default timeouts (pool 8,
// acquire 5 s, connect 5 s, statement 5 s + 2 s grace), frozen under 48
// concurrent clients: each gets a 503 within the documented bound
// (docs/HTTP.md, "Bounded store calls": the store-call queue timeout, which
// is the store's acquire timeout, plus one failing call), instead of
// queueing behind the adapter's pool without limit.
TEST_F(PostgresOutageTest, AFrozenServerUnder48ClientsAnswers503InBoundedTime) {
  auto opened = OpenStore(server_.url() + "?table=hung");
  ASSERT_TRUE(opened.has_value()) << opened.error().ToString();
  std::shared_ptr<Store> store(std::move(*opened));
  demo::DemoOptions options;
  options.threads = 2;
  testing::DemoServer demo(options, store);
  constexpr char kBody[] = R"({"item":"book"})";
  ASSERT_EQ(
      testing::SendOnce(demo.port(), testing::Post("/orders", kBody, "warm"))
          .result_int(),
      201u);

  ASSERT_TRUE(server_.Freeze()) << server_.error();
  constexpr int kClients = 48;
  std::vector<std::optional<beast::Response>> answers(kClients);
  std::vector<std::chrono::steady_clock::duration> took(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      const auto start = std::chrono::steady_clock::now();
      try {
        answers[i] = testing::SendOnce(
            demo.port(),
            testing::Post("/orders", kBody, "hung-" + std::to_string(i)));
      } catch (const std::exception&) {
        // No answer within the client's 60 s: recorded as missing.
      }
      took[i] = std::chrono::steady_clock::now() - start;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_TRUE(server_.Thaw()) << server_.error();

  // Queue timeout (acquire_timeout, 5 s) + one call: a round trip
  // (5 s + 2 s) or a connect (5 s); generous on a loaded machine.
  constexpr auto kBound = std::chrono::seconds(5 + 7);
  auto longest = std::chrono::steady_clock::duration::zero();
  for (int i = 0; i < kClients; ++i) {
    SCOPED_TRACE("client " + std::to_string(i));
    longest = std::max(longest, took[i]);
    ASSERT_TRUE(answers[i].has_value());
    EXPECT_EQ(testing::ProblemMismatch(*answers[i], 503,
                                       "idempotency_store_unavailable"),
              "");
  }
  std::printf(
      "48 clients, frozen PostgreSQL: longest time to an answer %.1f s\n",
      std::chrono::duration<double>(longest).count());
  EXPECT_LE(longest, kBound + std::chrono::seconds(5));
  EXPECT_EQ(demo.handler_runs(), 1u);
}

// idem-demo's server over HTTP on a store whose URI says connect=lazy (no
// flag of the demo's), opened while the server is down: 503 problems, then
// the order is served and replayed once the server is back.
TEST_F(PostgresOutageTest, TheDemoOnALazyStoreAnswers503ThenServes) {
  ASSERT_TRUE(server_.Pause()) << server_.error();
  std::shared_ptr<Store> store = OpenOn(server_.url() + "?" + kLazyParams);
  ASSERT_NE(store, nullptr);
  demo::DemoOptions options;
  options.threads = 2;
  testing::DemoServer demo(options, store);
  constexpr char kBody[] = R"({"item":"book"})";
  const auto down =
      testing::SendOnce(demo.port(), testing::Post("/orders", kBody, "lazy"));
  EXPECT_EQ(
      testing::ProblemMismatch(down, 503, "idempotency_store_unavailable"), "");

  ASSERT_TRUE(server_.Resume()) << server_.error();
  ASSERT_TRUE(testing::WaitFor([&] { return Serves(*store); }, seconds(60)));
  const auto created =
      testing::SendOnce(demo.port(), testing::Post("/orders", kBody, "lazy"));
  EXPECT_EQ(created.result_int(), 201u);
  const auto replay =
      testing::SendOnce(demo.port(), testing::Post("/orders", kBody, "lazy"));
  EXPECT_EQ(replay["Idempotent-Replayed"], "true");
  EXPECT_EQ(demo.handler_runs(), 1u);
}

// The idem-demo process itself, started with --store naming a lazy URI
// while the server is down (no flag of its own): it starts, POST /transfers
// (whose table the demo creates in the store's database) answers 503, and
// once the server is back the first transfer creates the table, runs and
// replays. Before the demo created its table lazily it exited at start.
TEST_F(PostgresOutageTest, TheDemoProcessStartsOnALazyUriWhileTheServerIsDown) {
  ASSERT_TRUE(server_.Pause()) << server_.error();
  testing::TempDir dir("idem-lazy-demo");
  testing::proc::DemoProcess demo(::idem::testing::BuiltPath(IDEM_DEMO_PATH),
                                  server_.url() + "?" + kLazyParams,
                                  dir.path() / "demo.log");
  const std::uint16_t port = demo.WaitListening();
  ASSERT_NE(port, 0) << testing::proc::ReadFile(dir.path() / "demo.log");
  constexpr char kBody[] = R"({"amount":1})";
  const auto down =
      testing::proc::Send(port, "POST", "/transfers", "lazy-transfer", kBody);
  ASSERT_TRUE(down.has_value());
  EXPECT_EQ(down->status, 503) << testing::proc::Describe(down);

  ASSERT_TRUE(server_.Resume()) << server_.error();
  std::optional<testing::proc::HttpResponse> created;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        created = testing::proc::Send(port, "POST", "/transfers",
                                      "lazy-transfer", kBody);
        return created && created->status != 503;
      },
      seconds(60)))
      << testing::proc::Describe(created);
  EXPECT_EQ(created->status, 201) << testing::proc::Describe(created);
  const auto replay =
      testing::proc::Send(port, "POST", "/transfers", "lazy-transfer", kBody);
  ASSERT_TRUE(replay.has_value());
  EXPECT_EQ(replay->status, 201);
  EXPECT_EQ(replay->Header("Idempotent-Replayed"), "true");
  // The table is the demo's own, named transfers in the server's database;
  // this server is the test's alone, so the count is the test's rows.
  const auto count =
      testing::proc::Send(port, "GET", "/transfers/count", "", "");
  ASSERT_TRUE(count.has_value());
  EXPECT_NE(count->body.find("\"count\":1"), std::string::npos)
      << testing::proc::Describe(count);
}

}  // namespace
}  // namespace idem
#endif  // IDEM_HAVE_HTTP_TESTS
