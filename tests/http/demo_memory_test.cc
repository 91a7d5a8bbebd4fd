// idem-demo's memory stays flat under large bodies (--max-order-bytes): the
// real process, on each --http, takes 300 POST /orders of 1 MiB each and its
// resident set (/proc/<pid>/status, VmRSS) stays well under what keeping
// every order's body would take (about 350 MB before the bound, 300 MiB of
// bodies alone). Bounded: 300 requests, each with its own deadline.

#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "demo_process_suite.h"
#include "http_test_util.h"
#include "support/demo_process.h"

namespace idem::testing {
namespace {

using ::testing::HasSubstr;

// VmRSS of `pid` in bytes, or -1.
long long ResidentBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    long long kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %lld kB", &kb) == 1) {
      return kb * 1024;
    }
  }
  return -1;
}

class DemoMemoryTest : public DemoProcessOnEachServer {};

INSTANTIATE_TEST_SUITE_P(Servers, DemoMemoryTest,
                         ::testing::ValuesIn(HttpServers()),
                         HttpServerParamName);

TEST_P(DemoMemoryTest, RssStaysFlatUnderOneMebibyteBodies) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // ASan's quarantine keeps freed memory resident (256 MB by default) and
  // TSan's shadow multiplies it: the resident set says nothing there.
  GTEST_SKIP() << "resident-set bound not meaningful under a sanitizer";
#endif
  const std::uint16_t port = Start({});
  ASSERT_NE(port, 0) << Log();
  const long long before = ResidentBytes(demo_->pid());
  ASSERT_GT(before, 0);
  const std::string body(std::size_t{1} << 20, 'a');
  std::string first_location;
  std::string last_location;
  for (int i = 0; i < 300; ++i) {
    auto r =
        proc::Send(port, "POST", "/orders", "big-" + std::to_string(i), body);
    ASSERT_TRUE(r.has_value()) << "request " << i << "\n" << Log();
    ASSERT_EQ(r->status, 201) << proc::Describe(r);
    (i == 0 ? first_location : last_location) = r->Header("Location");
  }
  const long long after = ResidentBytes(demo_->pid());
  std::printf("VmRSS %lld MB before, %lld MB after 300 x 1 MiB\n", before >> 20,
              after >> 20);
  // The orders kept are at most 16 MiB (the default --max-order-bytes);
  // the rest is the process, its buffers and the allocator's slack.
  EXPECT_LT(after, 120ll << 20) << "VmRSS " << (after >> 20) << " MB";
  // The newest order is kept, the oldest forgotten for it.
  auto last = proc::Send(port, "GET", last_location, "", "");
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->status, 200);
  EXPECT_THAT(last->body, HasSubstr(body.substr(0, 64)));
  auto first = proc::Send(port, "GET", first_location, "", "");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->status, 404);
}

TEST_P(DemoMemoryTest, MaxOrderBytesZeroKeepsNoOrder) {
  const std::uint16_t port = Start({"--max-order-bytes", "0"});
  ASSERT_NE(port, 0) << Log();
  auto r = proc::Send(port, "POST", "/orders", "k", R"({"item":"book"})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 201);
  auto get = proc::Send(port, "GET", r->Header("Location"), "", "");
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->status, 404);
}

TEST_P(DemoMemoryTest, BadMaxOrderBytesIsRefused) {
  for (const char* bad : {"-1", "68719476737", "lots"}) {
    demo_.reset();
    EXPECT_EQ(Start({"--max-order-bytes", bad}), 0) << bad;
    demo_.reset();
    EXPECT_THAT(Log(), HasSubstr("--max-order-bytes")) << bad;
  }
}

}  // namespace
}  // namespace idem::testing
