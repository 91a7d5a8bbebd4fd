// The demo servers' shared flags (examples/flags/flags.h: idem-demo and
// idem-grpc-demo): every duration in range is taken exactly, every other
// value is refused with a message naming the flag; nothing wraps around.
// And --protection on|off, --listen HOST:PORT, --threads.

#include "flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/testing/status_matchers.h"

namespace idem::demo {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

void ExpectRefused(const DurationFlag& flag, std::string_view text) {
  auto parsed = ParseDurationFlag(flag, text);
  ASSERT_THAT(parsed,
              ::idem::testing::HasErrorCode(ErrorCode::kInvalidArgument))
      << flag.name << " " << text;
  EXPECT_THAT(parsed.error().message(), HasSubstr(std::string(flag.name)));
  EXPECT_THAT(parsed.error().message(),
              HasSubstr(std::to_string(flag.max / flag.unit)));
}

TEST(DemoFlagsTest, TtlIsWholeSecondsUpTo365Days) {
  EXPECT_EQ(ParseDurationFlag(TtlFlag(), "86400"), Duration(hours(24)));
  EXPECT_EQ(ParseDurationFlag(TtlFlag(), "1"), Duration(seconds(1)));
  EXPECT_EQ(ParseDurationFlag(TtlFlag(), "31536000"),
            Duration(hours(24 * 365)));
  // 18446744074 s wrapped to 0.29 s; 9223372037 s overflowed the store's
  // time arithmetic.
  for (std::string_view bad :
       {"18446744074", "9223372037", "31536001", "0", "", "-1", "+5", "1.5",
        "soon", "1e3", " 60", "60 ", "99999999999999999999999999"}) {
    ExpectRefused(TtlFlag(), bad);
  }
}

TEST(DemoFlagsTest, LockTimeoutTakesFractions) {
  EXPECT_EQ(ParseDurationFlag(LockTimeoutFlag(), "60"), Duration(seconds(60)));
  EXPECT_EQ(ParseDurationFlag(LockTimeoutFlag(), "0.3"),
            Duration(milliseconds(300)));
  EXPECT_EQ(ParseDurationFlag(LockTimeoutFlag(), "1.25"),
            Duration(milliseconds(1250)));
  EXPECT_EQ(ParseDurationFlag(LockTimeoutFlag(), "86400"), Duration(hours(24)));
  EXPECT_EQ(ParseDurationFlag(LockTimeoutFlag(), "0.000000001"),
            Duration(std::chrono::nanoseconds(1)));
  for (std::string_view bad :
       {"86400.5", "86401", "1000000000000", "0", "0.0", "0.0000000001", ".5",
        "5.", "1.2.3", "-0.3", "0,3"}) {
    ExpectRefused(LockTimeoutFlag(), bad);
  }
}

TEST(DemoFlagsTest, LockWaitIsMillisecondsUpToAnHour) {
  EXPECT_EQ(ParseDurationFlag(LockWaitFlag(), "0"), Duration::zero());
  EXPECT_EQ(ParseDurationFlag(LockWaitFlag(), "2000"), Duration(seconds(2)));
  EXPECT_EQ(ParseDurationFlag(LockWaitFlag(), "3600000"), Duration(hours(1)));
  for (std::string_view bad :
       {"3600001", "-1", "0.5", "18446744073709551617"}) {
    ExpectRefused(LockWaitFlag(), bad);
  }
}

TEST(DemoFlagsTest, SweepIntervalIsSecondsUpToADayZeroIsOff) {
  EXPECT_EQ(ParseDurationFlag(SweepIntervalFlag(), "0"), Duration::zero());
  EXPECT_EQ(ParseDurationFlag(SweepIntervalFlag(), "60"),
            Duration(seconds(60)));
  EXPECT_EQ(ParseDurationFlag(SweepIntervalFlag(), "86400"),
            Duration(hours(24)));
  for (std::string_view bad : {"86401", "-1", "0.5", "never"}) {
    ExpectRefused(SweepIntervalFlag(), bad);
  }
}

TEST(DemoFlagsTest, ProtectionIsOnOrOff) {
  EXPECT_EQ(ParseProtectionFlag("on"), true);
  EXPECT_EQ(ParseProtectionFlag("off"), false);
  for (std::string_view bad :
       {"", "ON", "Off", "true", "false", "0", "1", "yes", "on ", " off"}) {
    auto parsed = ParseProtectionFlag(bad);
    ASSERT_THAT(parsed,
                ::idem::testing::HasErrorCode(ErrorCode::kInvalidArgument))
        << bad;
    EXPECT_THAT(parsed.error().message(), HasSubstr("--protection"));
    EXPECT_THAT(parsed.error().message(), HasSubstr("on or off"));
  }
}

TEST(DemoFlagsTest, ListenIsHostAndPort) {
  auto v4 = ParseListenFlag("127.0.0.1:0");
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 0);
  auto v6 = ParseListenFlag("[::1]:65535");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 65535);
  for (std::string_view bad : {"", "localhost", ":80", "h:", "h:65536", "h:-1",
                               "h:8o", "h: 80", "h:99999999999"}) {
    auto parsed = ParseListenFlag(bad);
    ASSERT_THAT(parsed,
                ::idem::testing::HasErrorCode(ErrorCode::kInvalidArgument))
        << bad;
    EXPECT_THAT(parsed.error().message(), HasSubstr("--listen"));
  }
}

TEST(DemoFlagsTest, ThreadsIsOneTo1024) {
  EXPECT_TRUE(CheckThreadsFlag(1).has_value());
  EXPECT_TRUE(CheckThreadsFlag(1024).has_value());
  for (int bad : {0, -1, 1025}) {
    auto checked = CheckThreadsFlag(bad);
    ASSERT_FALSE(checked.has_value()) << bad;
    EXPECT_THAT(checked.error().message(), HasSubstr("--threads"));
  }
}

}  // namespace
}  // namespace idem::demo
