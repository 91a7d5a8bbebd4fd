// Store URIs: parsing, typed parameters, redaction; OpenStore dispatch.

#include "idem/store_uri.h"

#include <chrono>

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
