// What a hostile or broken client cannot do to a server using the adapter:
// smuggle a request past the framing (RFC 9112 §6.1, §6.3), set the key or
// the scope in a chunked trailer, send two Authorization headers, make
// shutdown wait for a half-sent body; and what a handler cannot do: throw
// something that is not a std::exception and drop the connection. Also the
// demo's bodiless statuses, stored and replayed.

#include <utility>  // Before Asio's coroutine headers; see handler.h.

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/awaitable.hpp>
#include <boost/system/system_error.hpp>

#include "http_test_util.h"
#include "support/status_matchers.h"

namespace idem::testing {
namespace {

namespace asio = boost::asio;

constexpr char kBody[] = R"({"item":"book"})";

std::string ChunkedPost(std::string_view extra_headers,
                        std::string_view trailer = "") {
  return "POST /orders HTTP/1.1\r\nHost: x\r\n" + std::string(extra_headers) +
         "\r\n5\r\nhello\r\n0\r\n" + std::string(trailer) + "\r\n";
}

// The answer is a 400 problem and the connection closes: what followed the
// header is never parsed as a request. On RESTinio a request its parser
// (http-parser) rejects itself gets no answer: the connection just closes.
void ExpectRejectedAndClosed(DemoServer& server, const std::string& bytes,
                             std::string_view code, const std::string& what,
                             bool answer_optional = false) {
  TestClient client(server.port());
  // A smuggled request rides after the body.
  client.Write(bytes + Serialize(Post("/orders", kBody, "smuggled")));
  Response res;
  try {
    res = client.Read();
  } catch (const boost::system::system_error&) {
    if (answer_optional) return;  // Closed without an answer.
    throw;
  }
  EXPECT_EQ(ProblemMismatch(res, 400, code), "") << what;
  EXPECT_FALSE(res.keep_alive()) << what;
  EXPECT_TRUE(client.ReadsEof()) << what;
}

IDEM_HTTP_SERVER_SUITE(FramingTest);

TEST_P(FramingTest, TransferEncodingOtherThanOneChunkedGets400AndCloses) {
  DemoServer server(On());
  for (const char* te :
       {"xchunked", "chunked, identity", "chunked, chunked", "chunked,chunked",
        "identity", "gzip, chunked", "chunked;q=1", ""}) {
    ExpectRejectedAndClosed(
        server,
        ChunkedPost("Idempotency-Key: te\r\nTransfer-Encoding: " +
                    std::string(te) + "\r\n"),
        "bad_request", std::string("Transfer-Encoding: ") + te, restinio());
  }
  // Twice, as two fields.
  ExpectRejectedAndClosed(server,
                          ChunkedPost("Idempotency-Key: te\r\n"
                                      "Transfer-Encoding: chunked\r\n"
                                      "Transfer-Encoding: chunked\r\n"),
                          "bad_request", "two Transfer-Encoding fields",
                          restinio());
  // With Content-Length.
  ExpectRejectedAndClosed(server,
                          ChunkedPost("Idempotency-Key: te\r\n"
                                      "Transfer-Encoding: chunked\r\n"
                                      "Content-Length: 5\r\n"),
                          "bad_request", "Transfer-Encoding and Content-Length",
                          restinio());
  EXPECT_EQ(server.handler_runs(), 0u);

  // One `chunked` (any case) is served, and keeps the connection.
  TestClient client(server.port());
  client.Write(
      ChunkedPost("Idempotency-Key: ok\r\nTransfer-Encoding: Chunked\r\n"));
  const Response res = client.Read();
  EXPECT_EQ(res.result_int(), 201u);
  EXPECT_EQ(Json(res)["request"], "hello");
  EXPECT_TRUE(res.keep_alive());
  EXPECT_EQ(server.handler_runs(), 1u);
}

TEST_P(FramingTest, AKeyInATrailerIsNotAKey) {
  DemoServer server(On());
  TestClient client(server.port());
  client.Write(ChunkedPost("Transfer-Encoding: chunked\r\n",
                           "Idempotency-Key: in-trailer\r\n"));
  EXPECT_EQ(ProblemMismatch(client.Read(), 400, "idempotency_key_missing"), "");
  EXPECT_EQ(server.handler_runs(), 0u);
}

TEST_P(FramingTest, AnAuthorizationInATrailerIsNotTheScope) {
  DemoServer server(On());
  TestClient client(server.port());
  client.Write(
      ChunkedPost("Idempotency-Key: k\r\nTransfer-Encoding: chunked\r\n",
                  "Authorization: Bearer alice\r\n"));
  const Response first = client.Read();
  EXPECT_EQ(first.result_int(), 201u);
  // The same key and request, anonymous: the same scope, so a replay.
  const Response anonymous = client.Send(Post("/orders", "hello", "k"));
  EXPECT_TRUE(IsReplay(anonymous));
  EXPECT_EQ(anonymous.body(), first.body());
  // Alice's own key is another record.
  const Response alice = client.Send(
      Post("/orders", "hello", "k", {{"Authorization", "Bearer alice"}}));
  EXPECT_FALSE(IsReplay(alice));
  EXPECT_EQ(server.handler_runs(), 2u);
}

TEST_P(FramingTest, TwoAuthorizationHeadersGet400) {
  DemoServer server(On());
  TestClient client(server.port());
  client.Write(Serialize(Post(
      "/orders", kBody, "two-auth",
      {{"Authorization", "Bearer alice"}, {"Authorization", "Bearer bob"}})));
  const Response res = client.Read();
  EXPECT_EQ(ProblemMismatch(res, 400, "authorization_ambiguous"), "");
  EXPECT_FALSE(res.keep_alive());
  EXPECT_EQ(server.handler_runs(), 0u);
}

// Beast only: RESTinio answers no parse error (server_test.cc).
TEST(ParserRejectionTest, TheProblemHasNoEmptyInstance) {
  DemoServer server;
  TestClient client(server.port());
  client.Write(kRequestTheParserRejects);
  const Response res = client.Read();
  EXPECT_EQ(ProblemMismatch(res, 400, "bad_request"), "");
  const auto body = Json(res);
  ASSERT_TRUE(body.is_object()) << res.body();
  if (body.contains("instance")) {
    EXPECT_EQ(body["instance"], "/orders");
  }

  // A request without a path ("this is not HTTP") has no instance to
  // give: the problem builder omits an empty one.
}

// Beast only: RESTinio sends no 100 Continue, and closes its connections
// only when its I/O stops (server_test.cc).
TEST(ShutdownTest, AHalfSentBodyDoesNotHoldShutdown) {
  auto server = std::make_unique<DemoServer>();
  // Its header is read (the server says 100 Continue), half its body sent.
  TestClient half(server->port());
  half.Write(
      "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: half\r\n"
      "Expect: 100-continue\r\nContent-Length: 100\r\n\r\n");
  EXPECT_EQ(half.Read().result_int(), 100u);
  half.Write(std::string(50, 'x'));
  // And one request in its handler.
  std::optional<Response> in_flight;
  std::thread client([&] {
    in_flight = SendOnce(server->port(),
                         Post("/orders?delay_ms=500", kBody, "in-flight"));
  });
  ASSERT_TRUE(WaitFor([&] { return server->handler_runs() == 1; }));
  const auto start = std::chrono::steady_clock::now();
  server->demo().Shutdown();
  server->demo().Wait();
  const auto took = std::chrono::steady_clock::now() - start;
  client.join();
  // Generous (a loaded machine); the io timeout it waited for is 60 s.
  EXPECT_LT(took, std::chrono::seconds(20));
  ASSERT_TRUE(in_flight);
  EXPECT_EQ(in_flight->result_int(), 201u);
  EXPECT_TRUE(half.ReadsEof());
  EXPECT_EQ(server->handler_runs(), 1u);
}

IDEM_HTTP_SERVER_SUITE(DemoStatusTest);

TEST_P(DemoStatusTest, BodilessStatusesAreStoredAndReplayedWithoutABody) {
  DemoServer server(On());
  for (unsigned status : {204u, 304u}) {
    const std::string key = "bodiless-" + std::to_string(status);
    const std::string target = "/orders?status=" + std::to_string(status);
    TestClient client(server.port());
    for (int attempt = 0; attempt < 2; ++attempt) {
      const Response res = client.Send(Post(target, kBody, key));
      EXPECT_EQ(res.result_int(), status) << res.body();
      EXPECT_TRUE(res.body().empty());
      // RESTinio writes Content-Length on every response it frames (RFC
      // 9110 §8.6 forbids it on a 204): "0" at least says no body follows.
      if (restinio()) {
        EXPECT_EQ(HeaderOf(res, "Content-Length"), "0") << status;
      } else {
        EXPECT_FALSE(HasHeader(res, "Content-Length")) << status;
      }
      EXPECT_FALSE(HasHeader(res, "Content-Type")) << status;
      EXPECT_EQ(IsReplay(res), attempt == 1) << status;
      EXPECT_TRUE(res.keep_alive());
    }
  }
  EXPECT_EQ(server.handler_runs(), 2u);
}

// On each adapter, around a test's own handler.
IDEM_HTTP_SERVER_SUITE(HandlerErrorTest);

TEST_P(HandlerErrorTest, ANonStdExceptionGets500AndReleasesTheKey) {
  std::atomic<int> runs{0};
  AdapterServer server(GetParam(),
                       [&runs](Request) -> asio::awaitable<Response> {
                         ++runs;
                         throw 42;  // Not a std::exception.
                         co_return Response();
                       },
                       {.routes = {{"POST", "/x"}}});
  for (int i = 0; i < 2; ++i) {
    TestClient client(server.port());
    const Response res = client.Send(Post("/x", kBody, "k"));
    EXPECT_EQ(ProblemMismatch(res, 500, "internal_error"), "");
  }
  // Released each time: the retry ran the handler again.
  EXPECT_EQ(runs.load(), 2);
  EXPECT_EQ(server.guard().metrics().Get(Outcome::kReleased), 2u);
}

}  // namespace
}  // namespace idem::testing
