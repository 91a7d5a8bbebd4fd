// RequestFraming on its own: what it hands on however the bytes are split
// into reads, and where it stops. The shapes themselves, on both adapters,
// are in hardening_test.cc (Servers/FramingTest).

#include "idem/asio/request_framing.h"

#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace idem::asio {
namespace {

// Everything `framing` hands on for `bytes` read `step` bytes at a time.
std::string Frame(RequestFraming& framing, std::string_view bytes,
                  std::size_t step) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += step) {
    framing.Append(bytes.substr(i, step));
    out += framing.Ready();
    framing.Consume(framing.Ready().size());
  }
  return out;
}

const std::string kPipelined =
    "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
    "POST /b?q=1 HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n"
    "GET /c HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Tab: a\tb\r\n\r\n";

TEST(RequestFramingTest, HandsOnValidRequestsWhateverTheReads) {
  for (std::size_t step : {std::size_t{1}, std::size_t{2}, std::size_t{7},
                           std::size_t{64}, kPipelined.size()}) {
    RequestFraming framing;
    EXPECT_EQ(Frame(framing, kPipelined, step), kPipelined) << step;
    EXPECT_FALSE(framing.rejection()) << step;
  }
}

TEST(RequestFramingTest, AHeaderSectionIsHandedOnOnlyWhole) {
  RequestFraming framing;
  framing.Append("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n");
  EXPECT_TRUE(framing.Ready().empty());
  framing.Append("\r\nhel");
  EXPECT_EQ(framing.Ready(),
            "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel");
}

TEST(RequestFramingTest, LeadingEmptyLinesAreNotHandedOn) {
  RequestFraming framing;
  EXPECT_EQ(Frame(framing, "\r\n\r\nGET / HTTP/1.1\r\n\r\n", 1),
            "GET / HTTP/1.1\r\n\r\n");
}

TEST(RequestFramingTest, StopsBeforeARefusedRequestAfterWholeOnes) {
  for (std::size_t step : {std::size_t{1}, std::size_t{5}, std::size_t{4096}}) {
    RequestFraming framing;
    const std::string refused =
        "POST /orders?x=1 HTTP/1.1\r\nIdempotency-Key: K\r\n  tail\r\n\r\n";
    EXPECT_EQ(Frame(framing, kPipelined + refused + kPipelined, step),
              kPipelined)
        << step;
    ASSERT_TRUE(framing.rejection()) << step;
    EXPECT_EQ(framing.rejection()->status, 400);
    EXPECT_EQ(framing.rejection()->code, "bad_request");
    EXPECT_EQ(framing.rejection()->target, "/orders?x=1");
    EXPECT_TRUE(framing.rejection()->at_request_start);
  }
}

TEST(RequestFramingTest, ARefusalInsideABodyIsNotAtARequestStart) {
  RequestFraming framing;
  const std::string head =
      "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(Frame(framing, head + "5\r\nhelloXX", 1), head + "5\r\nhello");
  ASSERT_TRUE(framing.rejection());
  EXPECT_FALSE(framing.rejection()->at_request_start);
}

TEST(RequestFramingTest, BoundsTheHeaderSectionAndItsFields) {
  RequestFraming small({.header_bytes = 64, .header_fields = 2});
  small.Append("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n");
  ASSERT_TRUE(small.rejection());
  EXPECT_EQ(small.rejection()->status, 431);
  EXPECT_EQ(small.rejection()->code, "request_header_too_large");

  // An unfinished line over the bound is refused without waiting for its
  // end.
  RequestFraming endless({.header_bytes = 64, .header_fields = 2});
  endless.Append("GET / HTTP/1.1\r\nA: " + std::string(100, 'a'));
  ASSERT_TRUE(endless.rejection());
  EXPECT_EQ(endless.rejection()->status, 431);
  EXPECT_TRUE(endless.Ready().empty());
}

}  // namespace
}  // namespace idem::asio
