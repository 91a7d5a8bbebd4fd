// The demo servers' shared flags (examples/flags/flags.h: idem-demo and
// idem-grpc-demo): every duration in range is taken exactly, every other
// value is refused with a message naming the flag; nothing wraps around.
// And --protection on|off, --listen HOST:PORT, --threads.

#include "flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/guard_options.h"
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

TEST(DemoFlagsTest, LockFlagsDefaultToGuardOptionsAndParseTogether) {
  const LockFlagsText defaults;
  EXPECT_EQ(defaults.ttl, "86400");
  EXPECT_EQ(defaults.lock_timeout, "60");
  EXPECT_EQ(defaults.lock_renewal, "0");
  EXPECT_EQ(defaults.lock_wait, "0");
  ASSERT_OK_AND_ASSIGN(LockFlags parsed, ParseLockFlags(defaults));
  const GuardOptions guard;
  EXPECT_EQ(Duration(parsed.ttl), guard.ttl);
  EXPECT_EQ(parsed.lock_timeout, guard.lock_timeout);
  EXPECT_EQ(parsed.lock_renewal, guard.lock_renewal);
  EXPECT_EQ(Duration(parsed.lock_wait), guard.lock_wait);

  LockFlagsText given;
  given.ttl = "3600";
  given.lock_timeout = "1.5";
  given.lock_renewal = "0.3";
  given.lock_wait = "250";
  ASSERT_OK_AND_ASSIGN(parsed, ParseLockFlags(given));
  EXPECT_EQ(parsed.ttl, seconds(3600));
  EXPECT_EQ(parsed.lock_timeout, Duration(milliseconds(1500)));
  EXPECT_EQ(parsed.lock_renewal, Duration(milliseconds(300)));
  EXPECT_EQ(parsed.lock_wait, milliseconds(250));

  // The first bad flag is named; a renewal not below the timeout is refused.
  given.lock_renewal = "1.5";
  auto refused = ParseLockFlags(given);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().message(), HasSubstr("--lock-renewal"));
  given.lock_timeout = "0";
  refused = ParseLockFlags(given);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().message(), HasSubstr("--lock-timeout"));
}

TEST(DemoFlagsTest, DurationFlagTextReadsBackTheSameValue) {
  EXPECT_EQ(DurationFlagText(TtlFlag(), kMaxTtl), "31536000");
  EXPECT_EQ(DurationFlagText(LockWaitFlag(), kMaxLockWait), "3600000");
  EXPECT_EQ(DurationFlagText(LockTimeoutFlag(), milliseconds(300)), "0.3");
  EXPECT_EQ(DurationFlagText(LockTimeoutFlag(), std::chrono::nanoseconds(1)),
            "0.000000001");
  for (const Duration d :
       {Duration(seconds(60)), Duration(milliseconds(1250)),
        Duration(std::chrono::nanoseconds(123456789)), Duration::zero()}) {
    EXPECT_EQ(ParseDurationFlag(LockRenewalFlag(),
                                DurationFlagText(LockRenewalFlag(), d)),
              d);
  }
}

}  // namespace
}  // namespace idem::demo
