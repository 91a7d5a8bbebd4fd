// How a PostgreSQL store opens, on the shared server (IDEM_TEST_POSTGRES_URI):
//  - create=false opens only a table that exists at this build's version,
//    writing nothing: a mistyped table, a missing version row or an older
//    version is kUnavailable naming it, and no table or row appears;
//  - connect=lazy on a server that is up connects in the background and
//    serves; a refusal at that first connection (a newer schema version, a
//    foreign table) is logged once as an error, not retried, and keeps the
//    store unavailable, every call saying why;
//  - the URI's `create`, `connect` and port are checked before connecting.
// The outage cases (a lazy store opened while its server is down) are in
// postgres_outage_test.cc.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/open_store.h"
#include "idem/postgres_store.h"
#include "idem/store.h"
#include "postgres_test_util.h"
#include "support/store_times.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using ::testing::HasSubstr;
using testing::kLock;
using testing::kT0;
using testing::kTtl;
using Rows = std::vector<std::vector<std::string>>;

RecordId Id(std::uint8_t n) {
  RecordId id;
  id.bytes.fill(n);
  return id;
}

Fingerprint Fp(std::uint8_t n) {
  Fingerprint fp;
  fp.bytes.fill(n);
  return fp;
}

TEST(PostgresOpenModesUriTest, CreateConnectAndThePortAreChecked) {
  const std::string base = "postgresql://idem:secret@127.0.0.1:1/idem";
  for (const std::string& uri :
       {base + "?create=maybe", base + "?connect=later", base + "?connect=",
        std::string("postgresql://idem:secret@127.0.0.1:0/idem"),
        std::string("postgresql://idem:secret@127.0.0.1:65536/idem"),
        std::string("postgresql://idem:secret@127.0.0.1:99999/idem?"
                    "connect=lazy")}) {
    SCOPED_TRACE(uri);
    auto store = OpenStore(uri);
    ASSERT_FALSE(store.has_value());
    EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument)
        << store.error().ToString();
    EXPECT_THAT(store.error().message(), ::testing::Not(HasSubstr("secret")));
  }
  EXPECT_THAT(
      OpenStore(base.substr(0, base.rfind(':')) + ":0/idem").error().message(),
      HasSubstr("port must be a number from 1 to 65535"));
  PostgresStoreOptions typed;
  typed.host = "127.0.0.1";
  typed.port = "0";
  typed.dbname = "idem";
  auto store = PostgresStore::Open(typed);
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
}

class PostgresOpenModesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IDEM_REQUIRE_TEST_POSTGRES();
    table_ = testing::UniquePostgresTable("idemmode");
  }
  void TearDown() override {
    if (!table_.empty()) testing::DropPostgresTable(Base(), table_);
  }

  static std::string Base() { return testing::PostgresTestUri(); }
  std::string Uri(const std::string& extra = "") const {
    return testing::WithParams(
        Base(), "table=" + table_ + (extra.empty() ? "" : "&" + extra));
  }
  Result<std::unique_ptr<Store>> OpenWith(const std::string& extra,
                                          LogSink log = {}) const {
    return OpenStore(Uri(extra),
                     {.sweep_interval = Duration::zero(), .log = log});
  }
  Rows Query(const std::string& sql) const {
    return testing::PostgresQuery(Base(), sql, {table_});
  }
  // Whether the table exists, and its version rows.
  Rows Footprint() const {
    return Query(
        "SELECT to_regclass(quote_ident($1)) IS NOT NULL, (SELECT count(*) "
        "FROM idem_schema_versions WHERE table_name = $1)");
  }

  std::string table_;
};

TEST_F(PostgresOpenModesTest, CreateFalseOpensOnlyAnExistingTable) {
  // The version table exists (other stores on the server), this one not.
  ASSERT_TRUE(OpenStore(testing::WithParams(Base(), "table=idemmode_other"))
                  .has_value());
  auto missing = OpenWith("create=false");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(missing.error().message(),
              HasSubstr("no table \"" + table_ + "\""));
  EXPECT_THAT(missing.error().message(), HasSubstr("create=false"));
  EXPECT_EQ(Footprint(), (Rows{{"f", "0"}}));

  // Created by a store that may, then opened by one that may not.
  {
    auto created = OpenWith("");
    ASSERT_TRUE(created.has_value()) << created.error().ToString();
    auto claim = (*created)->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
    ASSERT_TRUE(claim.has_value());
  }
  auto existing = OpenWith("create=false");
  ASSERT_TRUE(existing.has_value()) << existing.error().ToString();
  auto seen = (*existing)->Inspect(Id(1), kT0);
  ASSERT_TRUE(seen.has_value()) << seen.error().ToString();
  EXPECT_TRUE(seen->has_value());

  // An older version is not migrated: it is named, and left as it was.
  Query("UPDATE idem_schema_versions SET version = 0 WHERE table_name = $1");
  auto old = OpenWith("create=false");
  ASSERT_FALSE(old.has_value());
  EXPECT_EQ(old.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(old.error().message(), HasSubstr("needs migrating"));
  EXPECT_EQ(Query("SELECT version FROM idem_schema_versions WHERE "
                  "table_name = $1"),
            (Rows{{"0"}}));
  // A newer one is refused as by any open.
  Query("UPDATE idem_schema_versions SET version = 99 WHERE table_name = $1");
  auto newer = OpenWith("create=false");
  ASSERT_FALSE(newer.has_value());
  EXPECT_EQ(newer.error().code(), ErrorCode::kInvalidArgument);
  testing::DropPostgresTable(Base(), "idemmode_other");
}

TEST_F(PostgresOpenModesTest, CreateFalseRefusesAForeignTable) {
  testing::PostgresQuery(Base(), "CREATE TABLE \"" + table_ + "\" (x int)");
  auto store = OpenWith("create=false");
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(store.error().message(), HasSubstr("not an idem table"));
  EXPECT_EQ(Footprint(), (Rows{{"t", "0"}}));
}

TEST_F(PostgresOpenModesTest, ALazyStoreOnARunningServerConnectsAndServes) {
  testing::SyncLog log;
  auto store = OpenWith("connect=lazy", log.Sink());
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  ASSERT_TRUE(testing::WaitFor([&] {
    return (*store)->Inspect(Id(1), kT0).has_value();
  })) << log.All();
  auto claim = (*store)->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
  EXPECT_EQ(Footprint(), (Rows{{"t", "1"}}));
  // Connected at the first attempt: nothing to say.
  EXPECT_EQ(log.All(), "");
}

// Many threads call a lazy store while it connects: each call is either
// kUnavailable (not connected yet) or served, never anything else, and once
// served every id is acquired exactly once (the connecting thread's table
// and statements are published to the callers; TSan checks the handover).
TEST_F(PostgresOpenModesTest, ManyThreadsOnALazyStoreWhileItConnects) {
  auto opened = OpenWith("connect=lazy&pool=4&acquire_timeout_ms=60000");
  ASSERT_TRUE(opened.has_value()) << opened.error().ToString();
  Store& store = **opened;
  constexpr int kThreads = 16;
  constexpr int kIds = 8;
  std::atomic<int> acquired{0}, other_errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int id = 0; id < kIds; ++id) {
        const bool served = testing::WaitFor(
            [&] {
              auto claim = store.Claim(Id(id), Fp(id), kT0, kTtl, kLock);
              if (!claim) {
                if (claim.error().code() != ErrorCode::kUnavailable) {
                  ++other_errors;
                }
                return false;
              }
              if (claim->outcome == ClaimOutcome::kAcquired) ++acquired;
              return true;
            },
            std::chrono::seconds(60), std::chrono::milliseconds(1));
        if (!served) ++other_errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_EQ(acquired.load(), kIds);
}

// The server answers but refuses the store (issue #27's example: a schema
// version this build does not know): an error in the log, once; the store
// stays unavailable, every call saying why, and is not retried.
TEST_F(PostgresOpenModesTest, ARefusalAtTheFirstConnectionKeepsItUnavailable) {
  ASSERT_TRUE(OpenWith("").has_value());
  Query("UPDATE idem_schema_versions SET version = 99 WHERE table_name = $1");
  testing::SyncLog log;
  auto store = OpenWith("connect=lazy", log.Sink());
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  ASSERT_TRUE(testing::WaitFor([&] { return log.Count("error: ") > 0; }))
      << log.All();
  EXPECT_EQ(log.Count("error: "), 1) << log.All();
  EXPECT_THAT(log.All(), HasSubstr("refused at its first connection"));
  EXPECT_THAT(log.All(), HasSubstr("newer than this build knows"));
  for (int i = 0; i < 3; ++i) {
    auto claim = (*store)->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
    ASSERT_FALSE(claim.has_value());
    EXPECT_EQ(claim.error().code(), ErrorCode::kUnavailable);
    EXPECT_THAT(claim.error().message(),
                HasSubstr("refused at its first connection (connect=lazy)"));
    EXPECT_THAT(claim.error().message(), HasSubstr("newer"));
  }
  // Fixing the table does not bring this store back (it is not retried);
  // a reopened one serves.
  Query("UPDATE idem_schema_versions SET version = 1 WHERE table_name = $1");
  EXPECT_FALSE((*store)->Inspect(Id(1), kT0).has_value());
  EXPECT_EQ(log.Count("error: "), 1) << log.All();
  auto reopened = OpenWith("connect=lazy");
  ASSERT_TRUE(reopened.has_value());
  EXPECT_TRUE(testing::WaitFor(
      [&] { return (*reopened)->Inspect(Id(1), kT0).has_value(); }));
}

}  // namespace
}  // namespace idem
