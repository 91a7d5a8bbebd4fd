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
#include "idem/testing/status_matchers.h"

namespace idem::testing {
namespace {

namespace asio = boost::asio;

constexpr char kBody[] = R"({"item":"book"})";

std::string ChunkedPost(std::string_view extra_headers,
                        std::string_view trailer = "") {
  return "POST /orders HTTP/1.1\r\nHost: x\r\n" + std::string(extra_headers) +
         "\r\n5\r\nhello\r\n0\r\n" + std::string(trailer) + "\r\n";
}

// The answer is a `status` problem and the connection closes: what
// followed the header is never parsed as a request.
void ExpectRefusedAndClosed(DemoServer& server, const std::string& bytes,
                            unsigned status, std::string_view code,
                            const std::string& what) {
  TestClient client(server.port());
  // A smuggled request rides after the body.
  client.Write(bytes + Serialize(Post("/orders", kBody, "smuggled")));
  const Response res = client.Read();
  EXPECT_EQ(ProblemMismatch(res, status, code), "") << what;
  EXPECT_FALSE(res.keep_alive()) << what;
  EXPECT_TRUE(client.ReadsEof()) << what;
}

void ExpectRejectedAndClosed(DemoServer& server, const std::string& bytes,
                             std::string_view code, const std::string& what) {
  ExpectRefusedAndClosed(server, bytes, 400, code, what);
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
        "bad_request", std::string("Transfer-Encoding: ") + te);
  }
  // Twice, as two fields.
  ExpectRejectedAndClosed(server,
                          ChunkedPost("Idempotency-Key: te\r\n"
                                      "Transfer-Encoding: chunked\r\n"
                                      "Transfer-Encoding: chunked\r\n"),
                          "bad_request", "two Transfer-Encoding fields");
  // With Content-Length.
  ExpectRejectedAndClosed(server,
                          ChunkedPost("Idempotency-Key: te\r\n"
                                      "Transfer-Encoding: chunked\r\n"
                                      "Content-Length: 5\r\n"),
                          "bad_request",
                          "Transfer-Encoding and Content-Length");
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

// Beast files a trailer field next to the header field of the same name:
// the trailer is erased by identity, whatever its name and wherever the
// header field it joins is.
TEST_P(FramingTest, ATrailerFieldNamedLikeAHeaderFieldNeverCounts) {
  DemoServer server(On());
  TestClient client(server.port());
  // A second key in the trailer: the header's key is the key.
  client.Write(
      ChunkedPost("Idempotency-Key: real\r\nTransfer-Encoding: chunked\r\n",
                  "Idempotency-Key: other\r\n"));
  const Response keyed = client.Read();
  EXPECT_EQ(keyed.result_int(), 201u) << keyed.body();
  EXPECT_TRUE(IsReplay(client.Send(Post("/orders", "hello", "real"))));

  // A trailer Host, the key the last header field: the key stays.
  client.Write(ChunkedPost(
      "Transfer-Encoding: chunked\r\nIdempotency-Key: after-host\r\n",
      "Host: trailer\r\n"));
  const Response hosted = client.Read();
  EXPECT_EQ(hosted.result_int(), 201u) << hosted.body();
  EXPECT_TRUE(IsReplay(client.Send(Post("/orders", "hello", "after-host"))));

  // A trailer Authorization, the header's before the key: the scope is the
  // header's, and the trailer is no second Authorization.
  client.Write(ChunkedPost(
      "Authorization: Bearer alice\r\nTransfer-Encoding: chunked\r\n"
      "Idempotency-Key: scoped\r\n",
      "Authorization: Bearer bob\r\n"));
  const Response scoped = client.Read();
  EXPECT_EQ(scoped.result_int(), 201u) << scoped.body();
  EXPECT_TRUE(IsReplay(client.Send(Post("/orders", "hello", "scoped",
                                        {{"Authorization", "Bearer alice"}}))));
  EXPECT_FALSE(IsReplay(client.Send(
      Post("/orders", "hello", "scoped", {{"Authorization", "Bearer bob"}}))));
  EXPECT_EQ(server.handler_runs(), 4u);
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

TEST_P(FramingTest, TheParserRejectionsProblemHasNoEmptyInstance) {
  DemoServer server(On());
  TestClient client(server.port());
  client.Write(kRequestTheParserRejects);
  const Response res = client.Read();
  EXPECT_EQ(ProblemMismatch(res, 400, "bad_request"), "");
  const auto body = Json(res);
  ASSERT_TRUE(body.is_object()) << res.body();
  EXPECT_EQ(body.value("instance", ""), "/orders");
  // A request without a path ("this is not HTTP") has no instance to
  // give: the problem builder omits an empty one (ProblemMismatch).
}

// The framing rules (idem/asio/request_framing.h, docs/HTTP.md), byte for
// byte, on every adapter: each shape is refused before any handler, with
// the same status and code, and the connection closes.
TEST_P(FramingTest, EveryAdapterRefusesTheSameShapes) {
  DemoServer server(On());
  const std::string post = "POST /orders HTTP/1.1\r\nHost: x\r\n";
  const std::string body = "Content-Length: 2\r\n\r\n{}";
  std::string many_fields;
  for (int i = 0; i < 2000; ++i) {
    many_fields += "X-F" + std::to_string(i) + ": v\r\n";
  }
  const struct {
    const char* what;
    std::string bytes;
    unsigned status;
  } shapes[] = {
      {"bare LF line ends",
       "POST /orders HTTP/1.1\nHost: x\nIdempotency-Key: lf\n"
       "Content-Length: 2\n\n{}",
       400},
      {"one bare LF", post + "Idempotency-Key: lf\n" + body, 400},
      {"a CR inside a line", post + "Idempotency-Key: a\rb\r\n" + body, 400},
      {"a space inside a field name",
       post + "Idempotency-Key: sp\r\nContent Length: 1\r\n\r\nx", 400},
      {"whitespace before the colon", post + "Idempotency-Key : v\r\n" + body,
       400},
      {"a tab before the colon", post + "Idempotency-Key\t: v\r\n" + body, 400},
      {"a field without a colon", post + "Idempotency-Key v\r\n" + body, 400},
      {"obs-fold in the key", post + "Idempotency-Key: K\r\n  tail\r\n" + body,
       400},
      {"obs-fold with a tab", post + "X-Note: a\r\n\tb\r\n" + body, 400},
      {"a control byte in a value",
       post +
           "Idempotency-Key: a\x01"
           "b\r\n" +
           body,
       400},
      {"a DEL in a value",
       post +
           "Idempotency-Key: a\x7f"
           "b\r\n" +
           body,
       400},
      {"HTTP/1.2", "POST /orders HTTP/1.2\r\nHost: x\r\n" + body, 400},
      {"HTTP/2.0", "POST /orders HTTP/2.0\r\nHost: x\r\n" + body, 400},
      {"no version", "POST /orders\r\nHost: x\r\n" + body, 400},
      {"two spaces", "POST  /orders HTTP/1.1\r\nHost: x\r\n" + body, 400},
      {"a lower-case version", "POST /orders http/1.1\r\nHost: x\r\n" + body,
       400},
      {"CONNECT", "CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n" + body, 400},
      {"Content-Length twice",
       post + "Idempotency-Key: cl\r\nContent-Length: 2\r\n" + body, 400},
      {"Content-Length 2, 2", post + "Content-Length: 2, 2\r\n\r\n{}", 400},
      {"Content-Length +2", post + "Content-Length: +2\r\n\r\n{}", 400},
      {"2,000 header fields", post + many_fields + body, 431},
      {"a 20 KB target",
       "POST /orders?" + std::string(20'000, 'a') + " HTTP/1.1\r\n" + body,
       431},
      {"a 64 KiB field",
       post + "X-Big: " + std::string(64 * 1024, 'b') + "\r\n" + body, 431},
  };
  for (const auto& shape : shapes) {
    ExpectRefusedAndClosed(
        server, shape.bytes, shape.status,
        shape.status == 431 ? "request_header_too_large" : "bad_request",
        shape.what);
  }
  EXPECT_EQ(server.handler_runs(), 0u);
  // Nothing was claimed (RESTinio once claimed a 64 KiB field's key).
  EXPECT_EQ(server.Count(Outcome::kExecuted), 0u);

  // Within the rules: an empty line before the request line is skipped, a
  // field of many bytes and many fields under the bounds are served.
  TestClient client(server.port());
  client.Write("\r\n" + post + "Idempotency-Key: fine\r\nX-Big: " +
               std::string(8 * 1024, 'b') + "\r\n" + body);
  const Response fine = client.Read();
  EXPECT_EQ(fine.result_int(), 201u) << fine.body();
  EXPECT_TRUE(fine.keep_alive());
  EXPECT_EQ(server.handler_runs(), 1u);
}

// A chunked body whose framing breaks after its header was handed on:
// never served. Beast answers 400; RESTinio's parser has started on the
// request, so its connection just closes (docs/HTTP.md).
TEST_P(FramingTest, ABrokenChunkedBodyIsNeverServed) {
  DemoServer server(On());
  const std::string head =
      "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: ch\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  for (const std::string& chunks :
       {std::string("zz\r\nhello\r\n0\r\n\r\n"),
        std::string("5\r\nhelloXX0\r\n\r\n"),
        std::string("5\nhello\r\n0\r\n\r\n"),
        std::string("5\r\nhello\r\n0\r\nX-T : v\r\n\r\n")}) {
    TestClient client(server.port());
    client.Write(head + chunks + Serialize(Post("/orders", kBody, "smuggled")));
    if (restinio()) {
      EXPECT_TRUE(client.ReadsEof()) << chunks;
    } else {
      const Response res = client.Read();
      EXPECT_EQ(ProblemMismatch(res, 400, "bad_request"), "") << chunks;
      EXPECT_TRUE(client.ReadsEof()) << chunks;
    }
  }
  EXPECT_EQ(server.handler_runs(), 0u);
}

// An obs-folded key was read as `K tail` by Beast and `K  tail` by
// RESTinio: two keys for one request. Refused on both, it is no key.
TEST_P(FramingTest, AFoldedKeyIsRefusedNotUnfolded) {
  DemoServer server(On());
  for (const char* fold : {"\r\n tail", "\r\n  tail", "\r\n\ttail"}) {
    ExpectRejectedAndClosed(
        server,
        "POST /orders HTTP/1.1\r\nHost: x\r\nIdempotency-Key: K" +
            std::string(fold) + "\r\nContent-Length: 2\r\n\r\n{}",
        "bad_request", "obs-fold");
  }
  EXPECT_EQ(server.handler_runs(), 0u);
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
