// Every row of SEMANTICS.md ("What a protected request gets", "What happens
// to the handler's response") over real HTTP, against idem-demo running in
// this process on each of its servers (HttpServers(): Beast, RESTinio):
// status, problem body and code, replay header, which headers a replay
// carries, Content-Length.

#include <memory>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "http_test_util.h"
#include "idem/metrics.h"
#include "support/down_store.h"

namespace idem::testing {
namespace {

constexpr char kBody[] = R"({"item":"book","qty":1})";

class SemanticsHttpTest : public HttpServerTest {
 protected:
  DemoServer server_{On()};
  std::uint16_t port() const { return server_.port(); }
};

TEST_P(SemanticsHttpTest, FirstRequestRunsTheHandler) {
  const Response res = SendOnce(port(), Post("/orders", kBody, "k-first"));
  EXPECT_EQ(res.result_int(), 201u);
  EXPECT_EQ(HeaderOf(res, "Content-Type"), "application/json");
  EXPECT_FALSE(HasHeader(res, "Idempotent-Replayed"));
  EXPECT_EQ(HeaderOf(res, "X-Demo-Instance"), "demo");
  EXPECT_EQ(HeaderOf(res, "Set-Cookie"), "demo=1");
  const auto body = Json(res);
  ASSERT_TRUE(body.is_object()) << res.body();
  EXPECT_EQ(body["instance"], "demo");
  EXPECT_EQ(body["request"], kBody);
  EXPECT_EQ(HeaderOf(res, "Location"),
            "/orders/" + body["id"].get<std::string>());
  EXPECT_EQ(HeaderOf(res, "Content-Length"), std::to_string(res.body().size()));
  EXPECT_EQ(server_.handler_runs(), 1u);
  EXPECT_EQ(server_.Count(Outcome::kExecuted), 1u);

  // The order exists (GET is not protected).
  const Response got = SendOnce(port(), Get(HeaderOf(res, "Location")));
  EXPECT_EQ(got.result_int(), 200u);
  EXPECT_EQ(got.body(), res.body());
  EXPECT_EQ(SendOnce(port(), Get("/orders/nope")).result_int(), 404u);
}

TEST_P(SemanticsHttpTest, ReplayCarriesOnlyStoredHeaders) {
  const Response first = SendOnce(port(), Post("/orders", kBody, "k-replay"));
  ASSERT_EQ(first.result_int(), 201u);
  const Response replay = SendOnce(port(), Post("/orders", kBody, "k-replay"));
  EXPECT_EQ(replay.result_int(), 201u);
  EXPECT_EQ(replay.body(), first.body());
  EXPECT_TRUE(IsReplay(replay));
  EXPECT_EQ(HeaderOf(replay, "Content-Type"), "application/json");
  EXPECT_EQ(HeaderOf(replay, "Location"), HeaderOf(first, "Location"));
  EXPECT_FALSE(HasHeader(replay, "Set-Cookie"));
  EXPECT_FALSE(HasHeader(replay, "X-Demo-Instance"));
  EXPECT_EQ(HeaderOf(replay, "Content-Length"),
            std::to_string(replay.body().size()));
  EXPECT_EQ(server_.handler_runs(), 1u);
  EXPECT_EQ(server_.Count(Outcome::kReplayed), 1u);
}

TEST_P(SemanticsHttpTest, KeyMissing) {
  const Response res = SendOnce(port(), Post("/orders", kBody, std::nullopt));
  EXPECT_EQ(ProblemMismatch(res, 400, "idempotency_key_missing"), "");
  EXPECT_EQ(server_.handler_runs(), 0u);
  EXPECT_EQ(server_.Count(Outcome::kKeyMissing), 1u);
}

TEST_P(SemanticsHttpTest, KeyInvalid) {
  const std::string too_long(256, 'k');
  for (const std::string& key :
       {std::string(""), too_long, std::string("\"unterminated"),
        std::string("caf\xC3\xA9")}) {
    const Response res = SendOnce(port(), Post("/orders", kBody, key));
    EXPECT_EQ(ProblemMismatch(res, 400, "idempotency_key_invalid"), "")
        << "key of " << key.size() << " bytes";
  }
  // The header given twice.
  const Response twice = SendOnce(
      port(), Post("/orders", kBody, "a", Headers{{"Idempotency-Key", "b"}}));
  EXPECT_EQ(ProblemMismatch(twice, 400, "idempotency_key_invalid"), "");
  EXPECT_EQ(server_.handler_runs(), 0u);
  EXPECT_EQ(server_.Count(Outcome::kKeyInvalid), 5u);

  // A quoted sf-string and a bare token are both accepted.
  EXPECT_EQ(SendOnce(port(), Post("/orders", kBody, "\"quoted\"")).result_int(),
            201u);
  EXPECT_EQ(SendOnce(port(), Post("/orders", kBody, "quoted")).result_int(),
            201u)
      << "\"quoted\" and quoted are the same key, and a replay keeps 201";
  EXPECT_EQ(server_.handler_runs(), 1u);
}

TEST_P(SemanticsHttpTest, BodyOverTheLimitIs413) {
  const std::string big((std::size_t{1} << 20) + 1, 'x');
  TestClient client(port());
  const Response res = client.Send(Post("/orders", big, "k-big"));
  EXPECT_EQ(ProblemMismatch(res, 413, "request_too_large"), "");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_EQ(server_.handler_runs(), 0u);
  EXPECT_EQ(server_.Count(Outcome::kTooLarge), 1u);

  // Exactly the limit is fine.
  const std::string max(std::size_t{1} << 20, 'x');
  EXPECT_EQ(SendOnce(port(), Post("/orders", max, "k-max")).result_int(), 201u);
}

TEST_P(SemanticsHttpTest, ChunkedBodyOverTheLimitIs413) {
  TestClient client(port());
  std::string wire =
      "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k-chunked\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  const std::string chunk(256 * 1024, 'y');
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
  for (int i = 0; i < 5; ++i) wire += size + chunk + "\r\n";
  wire += "0\r\n\r\n";
  client.Write(wire);
  const Response res = client.Read();
  EXPECT_EQ(ProblemMismatch(res, 413, "request_too_large"), "");
  EXPECT_EQ(server_.handler_runs(), 0u);
}

TEST_P(SemanticsHttpTest, KeyReusedWithAnotherRequestIs422) {
  ASSERT_EQ(SendOnce(port(), Post("/orders", kBody, "k-reuse")).result_int(),
            201u);
  const Response res =
      SendOnce(port(), Post("/orders", R"({"item":"pen"})", "k-reuse"));
  EXPECT_EQ(ProblemMismatch(res, 422, "idempotency_key_reused"), "");
  // The query is part of the request too.
  const Response other_target =
      SendOnce(port(), Post("/orders?x=1", kBody, "k-reuse"));
  EXPECT_EQ(ProblemMismatch(other_target, 422, "idempotency_key_reused"), "");
  EXPECT_EQ(server_.handler_runs(), 1u);
  EXPECT_EQ(server_.Count(Outcome::kMismatch), 2u);
}

TEST_P(SemanticsHttpTest, InProgressIs409WithRetryAfter) {
  std::optional<Response> first;
  std::thread slow([&] {
    first = SendOnce(port(), Post("/orders?delay_ms=1500", kBody, "k-busy"));
  });
  ASSERT_TRUE(WaitFor([&] { return server_.handler_runs() == 1; }));
  const Response res =
      SendOnce(port(), Post("/orders?delay_ms=1500", kBody, "k-busy"));
  slow.join();
  EXPECT_EQ(ProblemMismatch(res, 409, "idempotency_request_in_progress"), "");
  EXPECT_EQ(HeaderOf(res, "Retry-After"), "1");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->result_int(), 201u);
  EXPECT_EQ(server_.handler_runs(), 1u);
  EXPECT_EQ(server_.Count(Outcome::kConflict), 1u);
}

TEST_P(SemanticsHttpTest, ScopesKeepKeysApart) {
  const Response a =
      SendOnce(port(), Post("/orders", kBody, "k-shared",
                            Headers{{"Authorization", "Bearer a"}}));
  const Response b =
      SendOnce(port(), Post("/orders", kBody, "k-shared",
                            Headers{{"Authorization", "Bearer b"}}));
  const Response anonymous =
      SendOnce(port(), Post("/orders", kBody, "k-shared"));
  const Response a_again =
      SendOnce(port(), Post("/orders", kBody, "k-shared",
                            Headers{{"Authorization", "Bearer a"}}));
  EXPECT_EQ(a.result_int(), 201u);
  EXPECT_EQ(b.result_int(), 201u);
  EXPECT_EQ(anonymous.result_int(), 201u);
  EXPECT_FALSE(IsReplay(b));
  EXPECT_FALSE(IsReplay(anonymous));
  EXPECT_NE(a.body(), b.body());
  EXPECT_TRUE(IsReplay(a_again));
  EXPECT_EQ(a_again.body(), a.body());
  EXPECT_EQ(server_.handler_runs(), 3u);
}

// The demo's scope (HTTP.md): only `Bearer <name>` names a scope. Any other
// Authorization scheme is anonymous, and every anonymous request shares the
// scope "": two Basic users with one key and body get one response.
TEST_P(SemanticsHttpTest, ANonBearerAuthorizationIsAnonymous) {
  auto send = [&](std::optional<std::string> authorization) {
    Headers headers;
    if (authorization) headers.emplace_back("Authorization", *authorization);
    return SendOnce(port(), Post("/orders", kBody, "k-basic", headers));
  };
  const Response basic_alice = send("Basic YWxpY2U6cHc=");
  EXPECT_FALSE(IsReplay(basic_alice));
  // Bob, no credentials, an empty Bearer: all anonymous, alice's response.
  for (const auto& other :
       {std::optional<std::string>("Basic Ym9iOnB3"),
        std::optional<std::string>(), std::optional<std::string>("Bearer ")}) {
    const Response shared = send(other);
    EXPECT_TRUE(IsReplay(shared)) << other.value_or("(none)");
    EXPECT_EQ(shared.body(), basic_alice.body());
  }
  // The scheme's case does not matter: alice's own scope.
  EXPECT_FALSE(IsReplay(send("bearer alice")));
  EXPECT_EQ(server_.handler_runs(), 2u);
}

// Statuses the handler answers: which are stored (replayed) and which
// release the key (the handler runs again).
struct StatusCase {
  unsigned status;
  bool stored;
};

class HandlerStatusTest : public ::testing::TestWithParam<
                              std::tuple<demo::HttpFramework, StatusCase>> {
 protected:
  DemoServer server_{[] {
    demo::DemoOptions options;
    options.http = std::get<0>(GetParam());
    return options;
  }()};
  std::uint16_t port() const { return server_.port(); }
};

TEST_P(HandlerStatusTest, StoredOrReleased) {
  const StatusCase c = std::get<1>(GetParam());
  const std::string target = "/orders?status=" + std::to_string(c.status);
  const std::string key = "k-status-" + std::to_string(c.status);
  const Response first = SendOnce(port(), Post(target, kBody, key));
  EXPECT_EQ(first.result_int(), c.status);
  EXPECT_EQ(ProblemMismatch(first, c.status, "demo_status"), "");
  const Response second = SendOnce(port(), Post(target, kBody, key));
  EXPECT_EQ(second.result_int(), c.status);
  if (c.stored) {
    EXPECT_TRUE(IsReplay(second));
    EXPECT_EQ(second.body(), first.body());
    EXPECT_EQ(server_.handler_runs(), 1u);
  } else {
    EXPECT_FALSE(IsReplay(second));
    EXPECT_EQ(server_.handler_runs(), 2u);
    EXPECT_EQ(server_.Count(Outcome::kReleased), 2u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Statuses, HandlerStatusTest,
    ::testing::Combine(
        ::testing::ValuesIn(HttpServers()),
        ::testing::Values(StatusCase{200, true}, StatusCase{302, true},
                          StatusCase{400, true}, StatusCase{404, true},
                          StatusCase{408, false}, StatusCase{425, false},
                          StatusCase{429, false}, StatusCase{500, false},
                          StatusCase{503, false})),
    [](const auto& info) {
      return HttpServerName(std::get<0>(info.param)) +
             std::to_string(std::get<1>(info.param).status);
    });

TEST_P(SemanticsHttpTest, HandlerExceptionReleasesTheKey) {
  const Response first =
      SendOnce(port(), Post("/orders?fail=throw", kBody, "k-throw"));
  // The server's own error handling answers; idem stored nothing.
  EXPECT_EQ(ProblemMismatch(first, 500, "internal_error"), "");
  const Response second =
      SendOnce(port(), Post("/orders?fail=throw", kBody, "k-throw"));
  EXPECT_EQ(second.result_int(), 500u);
  EXPECT_FALSE(IsReplay(second));
  EXPECT_EQ(server_.handler_runs(), 2u);
  EXPECT_EQ(server_.Count(Outcome::kReleased), 2u);
}

TEST_P(SemanticsHttpTest, StatsAndMetrics) {
  SendOnce(port(), Post("/orders", kBody, "k-m"));
  SendOnce(port(), Post("/orders", kBody, "k-m"));
  const Response stats = SendOnce(port(), Get("/stats"));
  EXPECT_EQ(stats.result_int(), 200u);
  EXPECT_EQ(Json(stats),
            nlohmann::json::parse(R"({"handler_runs":1,"protection":"on"})"));
  const Response metrics = SendOnce(port(), Get("/metrics"));
  EXPECT_EQ(metrics.result_int(), 200u);
  EXPECT_NE(metrics.body().find("idem_requests_total{outcome=\"executed\"} 1"),
            std::string::npos)
      << metrics.body();
  EXPECT_NE(metrics.body().find("idem_requests_total{outcome=\"replayed\"} 1"),
            std::string::npos);
}

IDEM_HTTP_SERVER_SUITE(SemanticsHttpStoreTest);

TEST_P(SemanticsHttpStoreTest, StoreFullIs503) {
  DemoServer server(On(), OpenMemoryStore("memory:?capacity=1"));
  ASSERT_EQ(SendOnce(server.port(), Post("/orders", kBody, "k-1")).result_int(),
            201u);
  const Response res = SendOnce(server.port(), Post("/orders", kBody, "k-2"));
  EXPECT_EQ(ProblemMismatch(res, 503, "idempotency_store_full"), "");
  EXPECT_EQ(HeaderOf(res, "Retry-After"), "1");
  EXPECT_EQ(server.handler_runs(), 1u);
  EXPECT_EQ(server.Count(Outcome::kStoreFull), 1u);
}

TEST_P(SemanticsHttpStoreTest, StoreDownIs503FailClosed) {
  DemoServer server(On(), std::make_shared<DownStore>());
  const Response res = SendOnce(server.port(), Post("/orders", kBody, "k-1"));
  EXPECT_EQ(ProblemMismatch(res, 503, "idempotency_store_unavailable"), "");
  EXPECT_EQ(HeaderOf(res, "Retry-After"), "1");
  EXPECT_EQ(server.handler_runs(), 0u);
  EXPECT_EQ(server.Count(Outcome::kStoreError), 1u);
}

INSTANTIATE_TEST_SUITE_P(Servers, SemanticsHttpTest,
                         ::testing::ValuesIn(HttpServers()),
                         HttpServerParamName);

}  // namespace
}  // namespace idem::testing
