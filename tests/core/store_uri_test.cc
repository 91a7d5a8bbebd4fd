// Store URIs: parsing, typed parameters, redaction; OpenStore dispatch.

#include "idem/store_uri.h"

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/open_store.h"

namespace idem {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StoreUriTest, ParsesEveryDocumentedForm) {
  auto memory = StoreUri::Parse("memory:?capacity=1000000");
  ASSERT_TRUE(memory.has_value()) << memory.error().ToString();
  EXPECT_EQ(memory->scheme(), "memory");
  EXPECT_EQ(memory->path(), "");
  ASSERT_EQ(memory->params().size(), 1u);
  EXPECT_EQ(memory->params()[0].second, "1000000");

  auto rocks = StoreUri::Parse("rocksdb:/var/lib/idem/db?sync=false");
  ASSERT_TRUE(rocks.has_value());
  EXPECT_EQ(rocks->scheme(), "rocksdb");
  EXPECT_EQ(rocks->path(), "/var/lib/idem/db");

  auto sqlite = StoreUri::Parse("SQLite:///tmp/my%20dir/idem.db");
  ASSERT_TRUE(sqlite.has_value());
  EXPECT_EQ(sqlite->scheme(), "sqlite");
  EXPECT_EQ(sqlite->path(), "/tmp/my dir/idem.db");

  auto relative = StoreUri::Parse("sqlite:var/idem.db");
  ASSERT_TRUE(relative.has_value());
  EXPECT_EQ(relative->path(), "var/idem.db");

  auto pg = StoreUri::Parse(
      "postgresql://app:s%40cret@db.local:5433/orders?table=keys&pool=8");
  ASSERT_TRUE(pg.has_value());
  EXPECT_EQ(pg->user(), "app");
  EXPECT_EQ(pg->password(), "s@cret");
  EXPECT_EQ(pg->host(), "db.local");
  EXPECT_EQ(pg->port(), "5433");
  EXPECT_EQ(pg->path(), "orders");
  EXPECT_EQ(pg->redacted(),
            "postgresql://app:***@db.local:5433/orders?table=keys&pool=8");
}

TEST(StoreUriTest, TypedParametersAndUnknownOnes) {
  auto uri = StoreUri::Parse("x:?n=42&flag=yes&mode=Normal&extra=1");
  ASSERT_TRUE(uri.has_value());
  auto n = uri->TakeUint("n", 1, 100);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->value(), 42u);
  auto flag = uri->TakeBool("flag");
  ASSERT_TRUE(flag.has_value());
  EXPECT_TRUE(flag->value());
  auto mode = uri->TakeEnum("mode", {"off", "normal", "full"});
  ASSERT_TRUE(mode.has_value());
  EXPECT_EQ(mode->value(), "normal");
  auto absent = uri->TakeUint("absent", 0, 1);
  ASSERT_TRUE(absent.has_value());
  EXPECT_FALSE(absent->has_value());
  auto unknown = uri->RejectUnknown();
  ASSERT_FALSE(unknown.has_value());
  EXPECT_THAT(unknown.error().message(), HasSubstr("'extra'"));
}

TEST(StoreUriTest, BadValuesNameTheParameterAndTheUri) {
  for (const char* bad :
       {"x:?n=0", "x:?n=101", "x:?n=abc", "x:?n=", "x:?n=-1", "x:?n=5x"}) {
    auto uri = StoreUri::Parse(bad);
    ASSERT_TRUE(uri.has_value()) << bad;
    auto n = uri->TakeUint("n", 1, 100);
    ASSERT_FALSE(n.has_value()) << bad;
    EXPECT_EQ(n.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(n.error().message(), HasSubstr("'n'"));
    EXPECT_THAT(n.error().message(), HasSubstr(bad));
  }
  auto uri = StoreUri::Parse("x:?b=maybe");
  EXPECT_FALSE(uri->TakeBool("b").has_value());
  auto twice = StoreUri::Parse("x:?a=1&a=2");
  ASSERT_FALSE(twice.has_value());
  EXPECT_THAT(twice.error().message(), HasSubstr("twice"));
}

TEST(StoreUriTest, DurationsAreRangeCheckedInTheirUnit) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  auto uri = StoreUri::Parse("x:?wait_ms=1500&every_s=60");
  ASSERT_TRUE(uri.has_value());
  auto wait = uri->TakeDuration("wait_ms", milliseconds(0), milliseconds(3000));
  ASSERT_TRUE(wait.has_value());
  EXPECT_EQ(wait->value(), milliseconds(1500));
  auto every = uri->TakeDuration("every_s", seconds(1), seconds(60));
  ASSERT_TRUE(every.has_value());
  EXPECT_EQ(every->value(), seconds(60));
  auto absent = uri->TakeDuration("absent_s", seconds(0), seconds(1));
  ASSERT_TRUE(absent.has_value());
  EXPECT_FALSE(absent->has_value());
  EXPECT_TRUE(uri->RejectUnknown().has_value());

  for (const char* bad :
       {"x:?wait_ms=3001", "x:?wait_ms=-1", "x:?wait_ms=1e3",
        "x:?wait_ms=", "x:?wait_ms=18446744073709551616", "x:?wait_ms=1.5"}) {
    SCOPED_TRACE(bad);
    auto parsed = StoreUri::Parse(bad);
    ASSERT_TRUE(parsed.has_value());
    auto d =
        parsed->TakeDuration("wait_ms", milliseconds(0), milliseconds(3000));
    ASSERT_FALSE(d.has_value());
    EXPECT_EQ(d.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(d.error().message(), HasSubstr("'wait_ms'"));
    EXPECT_THAT(d.error().message(), HasSubstr("from 0 to 3000 ms"));
    EXPECT_THAT(d.error().message(), HasSubstr(bad));
  }
}

// The Read* forms: a present value is assigned, an absent one keeps the
// default, a bad one is an error that leaves the default and names the
// parameter, its range and the redacted URI.
enum class Mode { kOff, kNormal, kFull };

StoreUri MustParse(const std::string& text) {
  auto uri = StoreUri::Parse(text);
  EXPECT_TRUE(uri.has_value()) << text;
  return uri.has_value() ? std::move(*uri) : StoreUri();
}

TEST(StoreUriReadTest, PresentValuesAreAssignedAndTaken) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  StoreUri uri = MustParse(
      "x:?n=42&big=18446744073709551615&wait_ms=1500&every_s=60&flag=Off"
      "&name=a%20b&empty=&mode=FULL");
  std::size_t n = 7;
  std::uint64_t big = 0;
  std::chrono::nanoseconds wait{1};
  milliseconds every{1};
  bool flag = true;
  std::string name = "default";
  std::string empty = "default";
  Mode mode = Mode::kOff;
  const std::initializer_list<std::pair<std::string_view, Mode>> kModes = {
      {"off", Mode::kOff}, {"normal", Mode::kNormal}, {"full", Mode::kFull}};
  EXPECT_TRUE(uri.ReadUint("n", n, 1, 100).has_value());
  EXPECT_TRUE(
      uri.ReadUint("big", big, 0, std::numeric_limits<std::uint64_t>::max())
          .has_value());
  EXPECT_TRUE(
      uri.ReadDuration("wait_ms", wait, milliseconds(0), milliseconds(3000))
          .has_value());
  EXPECT_TRUE(
      uri.ReadDuration("every_s", every, seconds(1), seconds(60)).has_value());
  EXPECT_TRUE(uri.ReadBool("flag", flag).has_value());
  EXPECT_TRUE(uri.ReadString("name", name).has_value());
  EXPECT_TRUE(uri.ReadString("empty", empty).has_value());
  EXPECT_TRUE(uri.ReadEnum("mode", mode, kModes).has_value());
  EXPECT_EQ(n, 42u);
  EXPECT_EQ(big, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(wait, milliseconds(1500));
  EXPECT_EQ(every, seconds(60));
  EXPECT_FALSE(flag);
  EXPECT_EQ(name, "a b");
  EXPECT_EQ(empty, "");
  EXPECT_EQ(mode, Mode::kFull);
  // Each reader removed its parameter.
  EXPECT_TRUE(uri.params().empty());
  EXPECT_TRUE(uri.RejectUnknown().has_value());
}

TEST(StoreUriReadTest, AbsentValuesKeepTheDefault) {
  StoreUri uri = MustParse("x:?other=1");
  int n = -3;
  std::chrono::seconds wait{9};
  bool flag = true;
  std::string name = "default";
  Mode mode = Mode::kNormal;
  EXPECT_TRUE(uri.ReadUint("n", n, 0, 10).has_value());
  EXPECT_TRUE(uri.ReadDuration("wait_s", wait, std::chrono::seconds(0),
                               std::chrono::seconds(1))
                  .has_value());
  EXPECT_TRUE(uri.ReadBool("flag", flag).has_value());
  EXPECT_TRUE(uri.ReadString("name", name).has_value());
  EXPECT_TRUE(
      uri.ReadEnum("mode", mode, {{"off", Mode::kOff}, {"full", Mode::kFull}})
          .has_value());
  EXPECT_EQ(n, -3);
  EXPECT_EQ(wait, std::chrono::seconds(9));
  EXPECT_TRUE(flag);
  EXPECT_EQ(name, "default");
  EXPECT_EQ(mode, Mode::kNormal);
  ASSERT_EQ(uri.params().size(), 1u);
  EXPECT_EQ(uri.params()[0].first, "other");
}

// Out of range and malformed: the error names the parameter, what it must be
// and the value given, the output keeps its default, and a password in the
// URI never shows.
TEST(StoreUriReadTest, BadValuesAreErrorsThatNameTheParameterAndRange) {
  using std::chrono::milliseconds;
  const std::string base = "postgresql://user:Hunter2pw@h/db?";
  struct Case {
    std::string query;
    std::string expected;  // What the message says the value must be.
  };
  const Case cases[] = {
      {"n=0", "'n' must be an integer from 1 to 100, got '0'"},
      {"n=101", "'n' must be an integer from 1 to 100, got '101'"},
      {"n=-1", "'n' must be an integer from 1 to 100, got '-1'"},
      {"n=abc", "'n' must be an integer from 1 to 100, got 'abc'"},
      {"n=", "'n' must be an integer from 1 to 100, got ''"},
      {"n=1%202", "'n' must be an integer from 1 to 100, got '1 2'"},
      {"n=99999999999999999999999", "'n' must be an integer from 1 to 100"},
      {"wait_ms=3001", "'wait_ms' must be a duration from 0 to 3000 ms"},
      {"wait_ms=1.5", "'wait_ms' must be a duration from 0 to 3000 ms"},
      {"wait_ms=-1", "'wait_ms' must be a duration from 0 to 3000 ms"},
      {"flag=maybe", "'flag' must be true or false, got 'maybe'"},
      {"flag=", "'flag' must be true or false, got ''"},
      {"mode=fast", "'mode' must be one of off, normal, full, got 'fast'"},
      {"mode=", "'mode' must be one of off, normal, full, got ''"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.query);
    StoreUri uri = MustParse(base + c.query);
    std::uint16_t n = 5;
    milliseconds wait{7};
    bool flag = true;
    Mode mode = Mode::kNormal;
    Status status;
    const std::string param = c.query.substr(0, c.query.find('='));
    if (param == "n") status = uri.ReadUint("n", n, 1, 100);
    if (param == "wait_ms") {
      status = uri.ReadDuration("wait_ms", wait, milliseconds(0),
                                milliseconds(3000));
    }
    if (param == "flag") status = uri.ReadBool("flag", flag);
    if (param == "mode") {
      status = uri.ReadEnum("mode", mode,
                            {{"off", Mode::kOff},
                             {"normal", Mode::kNormal},
                             {"full", Mode::kFull}});
    }
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(status.error().message(), HasSubstr(c.expected));
    EXPECT_THAT(status.error().message(),
                HasSubstr("postgresql://user:***@h/db?"));
    EXPECT_THAT(status.error().message(), Not(HasSubstr("Hunter2pw")));
    EXPECT_EQ(n, 5);
    EXPECT_EQ(wait, milliseconds(7));
    EXPECT_TRUE(flag);
    EXPECT_EQ(mode, Mode::kNormal);
  }
}

TEST(StoreUriReadTest, TheBoundsAreInclusive) {
  StoreUri uri = MustParse("x:?lo=1&hi=100&lo_ms=0&hi_ms=3000");
  int lo = 0;
  int hi = 0;
  std::chrono::milliseconds lo_ms{5};
  std::chrono::milliseconds hi_ms{5};
  EXPECT_TRUE(uri.ReadUint("lo", lo, 1, 100).has_value());
  EXPECT_TRUE(uri.ReadUint("hi", hi, 1, 100).has_value());
  EXPECT_TRUE(uri.ReadDuration("lo_ms", lo_ms, std::chrono::milliseconds(0),
                               std::chrono::milliseconds(3000))
                  .has_value());
  EXPECT_TRUE(uri.ReadDuration("hi_ms", hi_ms, std::chrono::milliseconds(0),
                               std::chrono::milliseconds(3000))
                  .has_value());
  EXPECT_EQ(lo, 1);
  EXPECT_EQ(hi, 100);
  EXPECT_EQ(lo_ms, std::chrono::milliseconds(0));
  EXPECT_EQ(hi_ms, std::chrono::milliseconds(3000));
}

TEST(StoreUriTest, MalformedUrisAreErrors) {
  for (const char* bad : {"", "no-scheme", "://x", "memory: space"}) {
    auto uri = StoreUri::Parse(bad);
    ASSERT_FALSE(uri.has_value()) << bad;
    EXPECT_EQ(uri.error().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(StoreUriTest, RequireLocalPathRefusesHostsAndEmptyPaths) {
  constexpr const char* kUsage = "the x store takes a file: x:/path";
  auto ok = StoreUri::Parse("x:/var/lib/idem.db?a=1");
  ASSERT_TRUE(ok.has_value());
  EXPECT_TRUE(ok->RequireLocalPath(kUsage).has_value());
  auto relative = StoreUri::Parse("x:var/idem.db");
  ASSERT_TRUE(relative.has_value());
  EXPECT_TRUE(relative->RequireLocalPath(kUsage).has_value());
  for (const char* uri :
       {"x://host/var/idem.db", "x://user:secret@/var/idem.db",
        "x://:5432/var/idem.db"}) {
    SCOPED_TRACE(uri);
    auto parsed = StoreUri::Parse(uri);
    ASSERT_TRUE(parsed.has_value());
    auto status = parsed->RequireLocalPath(kUsage);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(status.error().message(), HasSubstr("unexpected host"));
    EXPECT_THAT(status.error().message(), HasSubstr(kUsage));
    EXPECT_THAT(status.error().message(), Not(HasSubstr("secret")));
  }
  auto empty = StoreUri::Parse("x:?a=1");
  ASSERT_TRUE(empty.has_value());
  auto status = empty->RequireLocalPath(kUsage);
  ASSERT_FALSE(status.has_value());
  EXPECT_THAT(status.error().message(), HasSubstr("missing the path"));
}

TEST(StoreUriTest, RedactionHidesPasswordsEverywhere) {
  EXPECT_EQ(RedactUri("postgresql://u:pw@h/db"), "postgresql://u:***@h/db");
  EXPECT_EQ(RedactUri("postgresql://u@h/db"), "postgresql://u@h/db");
  EXPECT_EQ(RedactUri("postgresql://h/db?user=u&password=pw&x=1"),
            "postgresql://h/db?user=u&password=***&x=1");
  EXPECT_EQ(RedactUri("not a uri :pw@"), "not a uri :pw@");
}

// Issue #8 §6: a password with a raw '/', '#', '?' or '@' (not
// percent-encoded) was printed in clear, since the authority was taken to
// end at the first of "/?#".
TEST(StoreUriTest, RedactionDoesNotDependOnParsing) {
  for (const char* password :
       {"pa/ss", "pa#ss", "pa?ss", "pa@ss", "p/a?s#s@x", "12/34", "pa ss"}) {
    SCOPED_TRACE(password);
    const std::string text =
        "postgresql://user:" + std::string(password) + "@db.example/idem";
    EXPECT_EQ(RedactUri(text), "postgresql://user:***@db.example/idem");
    // Whatever the parser makes of it (an error, or another host and port),
    // no message shows the password.
    auto parsed = StoreUri::Parse(text);
    const std::string message = parsed.has_value()
                                    ? parsed->InvalidArgument("x").message()
                                    : parsed.error().message();
    EXPECT_THAT(message, Not(HasSubstr(password)));
    EXPECT_THAT(message, HasSubstr("user:***@db.example"));
    auto opened = OpenStore(text);
    ASSERT_FALSE(opened.has_value());
    EXPECT_THAT(opened.error().message(), Not(HasSubstr(password)));
  }
}

TEST(StoreUriTest, AMalformedUriErrorHidesThePassword) {
  // uriparser refuses a raw space and '#' twice; the message still names the
  // URI, redacted.
  for (const char* text : {"postgresql://u:s3cr et/Zq9@h:5432/db",
                           "postgresql://u:s3cr#Zq9#x@h/db",
                           "redis://:s3cr/Zq9@h:6379/0?prefix=a b"}) {
    SCOPED_TRACE(text);
    auto parsed = StoreUri::Parse(text);
    ASSERT_FALSE(parsed.has_value());
    EXPECT_THAT(parsed.error().message(), HasSubstr("malformed URI"));
    EXPECT_THAT(parsed.error().message(), Not(HasSubstr("s3cr")));
    EXPECT_THAT(parsed.error().message(), Not(HasSubstr("Zq9")));
    EXPECT_THAT(parsed.error().message(), HasSubstr(":***@h"));
  }
}

TEST(OpenStoreTest, OpensTheMemoryStore) {
  auto store = OpenStore("memory:?capacity=10");
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_EQ((*store)->Info().name, "memory");
  EXPECT_FALSE((*store)->Info().durable);
  auto defaults = OpenStore("memory:");
  ASSERT_TRUE(defaults.has_value()) << defaults.error().ToString();
}

TEST(OpenStoreTest, UnknownSchemeAndParameterAreErrorsWithoutPasswords) {
  auto unknown = OpenStore("mongodb://user:hunter2@h/db");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(unknown.error().message(), HasSubstr("mongodb://user:***@h/db"));
  EXPECT_THAT(unknown.error().message(), HasSubstr("memory:"));
  EXPECT_THAT(unknown.error().message(), Not(HasSubstr("hunter2")));

  auto param = OpenStore("memory:?capacty=10");
  ASSERT_FALSE(param.has_value());
  EXPECT_EQ(param.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(param.error().message(), HasSubstr("capacty"));
  EXPECT_THAT(param.error().message(), HasSubstr("memory:?capacty=10"));

  auto bad = OpenStore("memory:?capacity=0");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInvalidArgument);
}

TEST(OpenStoreTest, ListsTheCompiledSchemes) {
  EXPECT_THAT(AvailableStoreSchemes(), ::testing::Contains("memory"));
}

}  // namespace
}  // namespace idem
