// Over real HTTP: POST /payments beside /orders in idem-demo, per-operation
// keys (the demo's key_per_operation, and each adapter passing its route
// pattern), the global switch through each adapter (on the store-call
// pool) and the demo started with it off, a compressed replay and the
// request-latency histogram in GET /metrics. Demo and adapter suites run on
// every server of HttpServers().

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <atomic>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "http_test_util.h"
#include "idem/metrics.h"
#include "support/down_store.h"

namespace idem::testing {
namespace {

constexpr char kBody[] = R"({"amount":10})";

demo::DemoOptions PerOperation() {
  demo::DemoOptions options;
  options.key_per_operation = true;
  return options;
}

// On each of idem-demo's servers (HttpServers()).
IDEM_HTTP_SERVER_SUITE(DemoPaymentsTest);

TEST_P(DemoPaymentsTest, SameKeyOnOrdersAndPaymentsIsA422ByDefault) {
  DemoServer server(On());
  EXPECT_EQ(SendOnce(server.port(), Post("/orders", kBody, "k")).result_int(),
            201u);
  EXPECT_EQ(
      ProblemMismatch(SendOnce(server.port(), Post("/payments", kBody, "k")),
                      422, "idempotency_key_reused"),
      "");
  EXPECT_EQ(server.handler_runs(), 1u);
}

TEST_P(DemoPaymentsTest, SameKeyOnOrdersAndPaymentsIsTwoOperationsWithTheFlag) {
  DemoServer server(On(PerOperation()));
  const Response order = SendOnce(server.port(), Post("/orders", kBody, "k"));
  const Response payment =
      SendOnce(server.port(), Post("/payments", kBody, "k"));
  EXPECT_EQ(order.result_int(), 201u);
  EXPECT_EQ(payment.result_int(), 201u);
  EXPECT_FALSE(IsReplay(payment));
  EXPECT_NE(Json(order)["id"], Json(payment)["id"]);
  EXPECT_EQ(server.handler_runs(), 2u);
  EXPECT_EQ(Json(SendOnce(server.port(), Get("/stats")))["handler_runs"], 2);
  // Each replays its own response.
  const Response again = SendOnce(server.port(), Post("/payments", kBody, "k"));
  EXPECT_TRUE(IsReplay(again));
  EXPECT_EQ(again.body(), payment.body());
  EXPECT_EQ(server.handler_runs(), 2u);
}

// --protection off (DemoOptions::protection): the demo starts unprotected,
// /stats says so, and switching on at run time protects the next request.
TEST_P(DemoPaymentsTest, StartedWithProtectionOffThenSwitchedOn) {
  demo::DemoOptions options;
  options.protection = false;
  DemoServer server(On(options));
  const auto port = server.port();
  for (int i = 0; i < 2; ++i) {
    const Response res = SendOnce(port, Post("/orders", kBody, "k"));
    EXPECT_EQ(res.result_int(), 201u);
    EXPECT_FALSE(IsReplay(res));
  }
  EXPECT_EQ(server.handler_runs(), 2u);
  EXPECT_EQ(server.Count(Outcome::kUnprotected), 2u);
  EXPECT_EQ(Json(SendOnce(port, Get("/stats")))["protection"], "off");

  server.demo().guard()->SetEnabled(true);
  EXPECT_EQ(Json(SendOnce(port, Get("/stats")))["protection"], "on");
  const Response first = SendOnce(port, Post("/orders", kBody, "k"));
  EXPECT_FALSE(IsReplay(first));
  const Response again = SendOnce(port, Post("/orders", kBody, "k"));
  EXPECT_TRUE(IsReplay(again));
  EXPECT_EQ(again.body(), first.body());
  EXPECT_EQ(server.handler_runs(), 3u);
}

TEST_P(DemoPaymentsTest, PaymentsAreProtectedLikeOrders) {
  DemoServer server(On());
  const auto port = server.port();
  const Response first = SendOnce(port, Post("/payments", kBody, "p"));
  ASSERT_EQ(first.result_int(), 201u);
  EXPECT_EQ(HeaderOf(first, "Content-Type"), "application/json");
  EXPECT_EQ(Json(first)["request"], kBody);
  // Its id is an order id: GET /orders/<id> finds it.
  EXPECT_EQ(HeaderOf(first, "Location"),
            "/orders/" + Json(first)["id"].get<std::string>());
  EXPECT_EQ(SendOnce(port, Get(HeaderOf(first, "Location"))).body(),
            first.body());
  const Response replay = SendOnce(port, Post("/payments", kBody, "p"));
  EXPECT_TRUE(IsReplay(replay));
  EXPECT_EQ(replay.body(), first.body());
  EXPECT_FALSE(HasHeader(replay, "Set-Cookie"));
  EXPECT_EQ(server.handler_runs(), 1u);

  // The query knobs and the key rules are /orders'.
  EXPECT_EQ(
      ProblemMismatch(SendOnce(port, Post("/payments", kBody, std::nullopt)),
                      400, "idempotency_key_missing"),
      "");
  EXPECT_EQ(
      SendOnce(port, Post("/payments?status=503", kBody, "s")).result_int(),
      503u);
  EXPECT_EQ(
      SendOnce(port, Post("/payments?status=503", kBody, "s")).result_int(),
      503u);
  EXPECT_EQ(server.Count(Outcome::kReleased), 2u);
  EXPECT_EQ(
      SendOnce(port, Post("/payments?fail=throw", kBody, "t")).result_int(),
      500u);
  EXPECT_EQ(server.handler_runs(), 4u);
  const Response get = SendOnce(port, Get("/payments"));
  EXPECT_EQ(get.result_int(), 405u);
  EXPECT_EQ(HeaderOf(get, "Allow"), "POST");
}

Response Ok(const Request& req, std::string body) {
  Response res(http::status::created, req.version());
  res.set(http::field::content_type, "application/json");
  res.body() = std::move(body);
  res.keep_alive(req.keep_alive());
  res.prepare_payload();
  return res;
}

// The adapters (HttpServers()) around a test's own handler.
IDEM_HTTP_SERVER_SUITE(AdapterFeaturesTest);

TEST_P(AdapterFeaturesTest, TheMatchedPatternNamesTheOperation) {
  std::atomic<int> runs{0};
  AdapterSetup setup;
  setup.options.key_per_operation = true;
  setup.routes = {{"POST", "/orders/{id}"}, {"POST", "/refunds/{id}"}};
  AdapterServer server(
      GetParam(),
      [&](Request req) {
        ++runs;
        return Ok(req, "{}");
      },
      setup);
  const auto port = server.port();
  EXPECT_EQ(SendOnce(port, Post("/orders/1", kBody, "k")).result_int(), 201u);
  // Another id on the same pattern is the same operation: the key was used
  // for another request (target). Had the adapter passed the path, this
  // would be a new operation and run.
  EXPECT_EQ(ProblemMismatch(SendOnce(port, Post("/orders/2", kBody, "k")), 422,
                            "idempotency_key_reused"),
            "");
  EXPECT_EQ(SendOnce(port, Post("/refunds/1", kBody, "k")).result_int(), 201u);
  EXPECT_EQ(runs, 2);
}

TEST_P(AdapterFeaturesTest, SwitchedOffTheHandlerRunsUnprotected) {
  // Over a store that fails every call, on the store-call pool: nothing may
  // reach it, and no queue timeout may answer for the Guard.
  std::atomic<int> runs{0};
  AdapterSetup setup;
  setup.store = std::make_shared<DownStore>();
  setup.routes = {{"POST", "/orders"}};
  setup.calls.store_calls = ::idem::asio::StoreCalls::kPool;
  AdapterServer server(
      GetParam(),
      [&](Request req) {
        ++runs;
        return Ok(req, "{}");
      },
      setup);
  const auto port = server.port();
  EXPECT_EQ(ProblemMismatch(SendOnce(port, Post("/orders", kBody, "k")), 503,
                            "idempotency_store_unavailable"),
            "");
  server.guard().SetEnabled(false);
  for (int i = 0; i < 2; ++i) {
    const Response res = SendOnce(port, Post("/orders", kBody, "k"));
    EXPECT_EQ(res.result_int(), 201u);
    EXPECT_FALSE(IsReplay(res));
  }
  EXPECT_EQ(SendOnce(port, Post("/orders", kBody, std::nullopt)).result_int(),
            201u);
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kUnprotected), 3u);
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kStoreError), 1u);
  server.guard().SetEnabled(true);
  EXPECT_EQ(SendOnce(port, Post("/orders", kBody, "k")).result_int(), 503u);
}

TEST_P(AdapterFeaturesTest, ACompressedReplayKeepsItsEncoding) {
  std::atomic<int> runs{0};
  const std::string gzip("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  AdapterSetup setup;
  setup.routes = {{"POST", "/receipts"}};
  AdapterServer server(
      GetParam(),
      [&](Request req) {
        ++runs;
        Response res = Ok(req, gzip);
        res.set(http::field::content_encoding, "gzip");
        res.set(http::field::content_disposition,
                "attachment; filename=\"receipt.json\"");
        res.prepare_payload();
        return res;
      },
      setup);
  const Response first = SendOnce(server.port(), Post("/receipts", kBody, "r"));
  EXPECT_EQ(first.body(), gzip);
  EXPECT_EQ(HeaderOf(first, "Content-Encoding"), "gzip");
  const Response replay =
      SendOnce(server.port(), Post("/receipts", kBody, "r"));
  EXPECT_TRUE(IsReplay(replay));
  EXPECT_EQ(replay.body(), gzip);
  EXPECT_EQ(HeaderOf(replay, "Content-Encoding"), "gzip");
  EXPECT_EQ(HeaderOf(replay, "Content-Disposition"),
            "attachment; filename=\"receipt.json\"");
  EXPECT_EQ(HeaderOf(replay, "Content-Length"), "10");
  EXPECT_EQ(runs, 1);
}

TEST(DemoMetricsTest, RequestLatencyHistogramIsExported) {
  DemoServer server;
  SendOnce(server.port(), Post("/orders", kBody, "m"));
  SendOnce(server.port(), Post("/payments", kBody, "m"));  // mismatch
  SendOnce(server.port(), Post("/orders", kBody, "m"));    // replayed
  const std::string text = SendOnce(server.port(), Get("/metrics")).body();
  for (const char* outcome : {"executed", "mismatch", "replayed"}) {
    EXPECT_NE(text.find("idem_request_duration_seconds_count{outcome=\"" +
                        std::string(outcome) + "\"} 1\n"),
              std::string::npos)
        << outcome << "\n"
        << text;
  }
}

}  // namespace
}  // namespace idem::testing
