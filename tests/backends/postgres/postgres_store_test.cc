// PostgreSQL-store-only tests: what the contract suite cannot see from the
// Store interface. URIs and their errors (password redacted); the schema,
// its version table, and two stores creating it at once; records surviving
// a reopen; damaged rows are kDataLoss; the client key never reaches the
// table; two stores with their own pools racing for one id; a full pool and
// a blocked statement fail with kUnavailable within their timeouts;
// PurgeExpired in batches, skipping locked rows.
//
// Against the shared server of IDEM_TEST_POSTGRES_URI, each test on tables
// of its own (dropped at the end). The tests look at the tables through raw
// libpq connections. Time comes from explicit TimePoints; only the waits
// for a statement to be blocked on the server poll real time, bounded.

#include <arpa/inet.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/open_store.h"
#include "idem/postgres_store.h"
#include "idem/store.h"
#include "postgres_schema.h"
#include "postgres_store_test_peer.h"
#include "postgres_test_util.h"
#include "support/lost_races.h"
#include "support/renewal_writes.h"
#include "support/secret_request.h"
#include "support/store_times.h"
#include "support/store_uri_checks.h"
#include "support/two_stores.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::DropPostgresTable;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::OpenStoreError;
using testing::PostgresQuery;
using testing::PostgresTestUri;
using testing::UniquePostgresTable;
using testing::WithParams;

using testing::kLock;
using testing::kT0;
using testing::kTtl;

template <typename IdType>
IdType MakeBytes(std::uint64_t n, std::uint64_t salt) {
  IdType out;
  std::uint64_t state = n * 0x9E3779B97F4A7C15ull + salt;
  for (std::size_t i = 0; i < IdType::kSize; i += 8) {
    state ^= state >> 31;
    state *= 0xBF58476D1CE4E5B9ull;
    state ^= state >> 29;
    std::memcpy(out.bytes.data() + i, &state, 8);
  }
  return out;
}

RecordId Id(std::uint64_t n) { return MakeBytes<RecordId>(n, 1); }
Fingerprint Fp(std::uint64_t n) { return MakeBytes<Fingerprint>(n, 2); }

Response Created(std::string body = "made") {
  return Response{201, {{"Content-Type", "text/plain"}}, std::move(body)};
}

using Conn = testing::PostgresConnection;

Conn Connect(const std::string& uri) {
  Conn c = testing::ConnectPostgres(uri);
  EXPECT_EQ(PQstatus(c.get()), CONNECTION_OK) << PQerrorMessage(c.get());
  return c;
}

// Runs `sql` on `c`; true when it succeeded.
bool Exec(PGconn* c, const std::string& sql) {
  return testing::PostgresExec(c, sql);
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "\\x";
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xF];
  }
  return out;
}

std::string Unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(
        std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}

// A TimePoint as the table stores it, in SQL text.
std::string NanosText(TimePoint t) { return std::to_string(ToUnixNanos(t)); }

// ---------------------------------------------------------------------------
// URIs. These need no server: each fails before connecting, or connects to
// a port nobody listens on.

TEST(PostgresUriTest, BadParametersAreInvalidArgumentsNamingTheRedactedUri) {
  const std::string base = "postgresql://idem:secret@127.0.0.1:1/idem";
  for (const std::string& query : std::vector<std::string>{
           "?tabel=x", "?pool=0", "?pool=1025", "?pool=eight", "?table=1abc",
           "?table=a-b", "?table=a%22b",
           "?table=", "?table=" + std::string(49, 'a'),
           "?acquire_timeout_ms=-1", "?connect_timeout_s=0",
           "?statement_timeout_ms=0", "?sslmode=sometimes", "?pool=2&pool=3"}) {
    SCOPED_TRACE(query);
    const Error e = OpenStoreError(base + query);
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.ToString();
    EXPECT_THAT(e.message(), HasSubstr("postgresql://idem:***@127.0.0.1:1"));
    EXPECT_THAT(e.message(), Not(HasSubstr("secret")));
  }
  EXPECT_THAT(OpenStoreError(base + "?tabel=x").message(), HasSubstr("tabel"));
}

// Every duration has its maximum (1 h), named in the error with its unit.
TEST(PostgresUriTest, DurationsAboveTheirMaximumNameTheParameter) {
  const std::string base = "postgresql://idem:secret@127.0.0.1:1/idem";
  for (const char* query :
       {"?acquire_timeout_ms=3600001", "?connect_timeout_s=3601",
        "?statement_timeout_ms=3600001", "?statement_timeout_ms=1e9"}) {
    SCOPED_TRACE(query);
    const std::string name = std::string(query + 1, std::strchr(query, '='));
    const Error e = OpenStoreError(base + query);
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.ToString();
    EXPECT_THAT(e.message(), HasSubstr("'" + name + "' must be a duration"));
    EXPECT_THAT(e.message(), Not(HasSubstr("secret")));
  }
}

TEST(PostgresUriTest, MissingDatabaseIsInvalidArgument) {
  for (const std::string uri :
       {"postgresql://idem:secret@127.0.0.1:1", "postgresql://idem@h/a/b",
        "postgres://idem:secret@127.0.0.1:1/"}) {
    SCOPED_TRACE(uri);
    const Error e = OpenStoreError(uri);
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.ToString();
    EXPECT_THAT(e.message(), Not(HasSubstr("secret")));
  }
}

// A loopback port bound but not listening, held while it lives: connecting
// to it is refused at once, and nobody else can take it meanwhile.
class RefusingPort {
 public:
  RefusingPort() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ >= 0 &&
        ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = std::to_string(ntohs(addr.sin_port));
    }
  }
  ~RefusingPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  const std::string& port() const { return port_; }

 private:
  int fd_;
  std::string port_;
};

TEST(PostgresUriTest, UnreachableServerIsUnavailableNamingTheRedactedUri) {
  RefusingPort refusing;
  ASSERT_FALSE(refusing.port().empty());
  const std::string where = "postgres://idem:***@127.0.0.1:" + refusing.port();
  const auto start = std::chrono::steady_clock::now();
  const Error e =
      OpenStoreError("postgres://idem:secret@127.0.0.1:" + refusing.port() +
                     "/idem?connect_timeout_s=2&table=t");
  EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << e.ToString();
  EXPECT_THAT(e.message(), HasSubstr(where + "/idem"));
  EXPECT_THAT(e.message(), Not(HasSubstr("secret")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(30));
}

TEST(PostgresUriTest, BothSchemesAreRegistered) {
  const std::vector<std::string> schemes = AvailableStoreSchemes();
  EXPECT_THAT(schemes, ::testing::Contains("postgresql"));
  EXPECT_THAT(schemes, ::testing::Contains("postgres"));
}

TEST(PostgresUriTest, TypedOptionsAreValidated) {
  PostgresStoreOptions o;
  o.host = "127.0.0.1";
  o.port = "1";
  o.dbname = "idem";
  o.table = "bad name";
  auto store = PostgresStore::Open(o);
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
  o.table = "ok";
  o.pool_size = 0;
  store = PostgresStore::Open(o);
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Against the shared server.

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IDEM_REQUIRE_TEST_POSTGRES();
    base_ = PostgresTestUri();
    table_ = NewTable();
  }

  void TearDown() override {
    for (const std::string& t : tables_) DropPostgresTable(base_, t);
  }

  std::string NewTable() {
    tables_.push_back(UniquePostgresTable("idempt"));
    return tables_.back();
  }

  std::string Uri(const std::string& table, const std::string& extra = "") {
    return WithParams(base_,
                      "table=" + table + (extra.empty() ? "" : "&") + extra);
  }

  std::unique_ptr<Store> Open(const std::string& extra = "") {
    return OpenTable(table_, extra);
  }

  // Without OpenStore's sweeper: the tests count what PurgeExpired deletes,
  // and their records' times are far in the past of the system clock.
  std::unique_ptr<Store> OpenTable(const std::string& table,
                                   const std::string& extra = "") {
    auto store =
        OpenStore(Uri(table, extra), {.sweep_interval = Duration::zero()});
    EXPECT_TRUE(store.has_value()) << store.error().ToString();
    return store.has_value() ? std::move(*store) : nullptr;
  }

  std::vector<std::vector<std::string>> Query(
      const std::string& sql, const std::vector<std::string>& params = {}) {
    return PostgresQuery(base_, sql, params);
  }

  std::string base_;
  std::string table_;
  std::vector<std::string> tables_;
};

TEST_F(PostgresStoreTest, OpenCreatesTheTableItsIndexAndAVersionRow) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Info().name, "postgres");
  EXPECT_TRUE(store->Info().durable);
  EXPECT_TRUE(store->Info().shared_across_processes);
  EXPECT_EQ(Query("SELECT version FROM idem_schema_versions "
                  "WHERE table_name = $1",
                  {table_}),
            (std::vector<std::vector<std::string>>{
                {std::to_string(PostgresStore::kSchemaVersion)}}));
  EXPECT_EQ(Query("SELECT column_name, data_type FROM "
                  "information_schema.columns WHERE table_name = $1 "
                  "ORDER BY ordinal_position",
                  {table_}),
            (std::vector<std::vector<std::string>>{{"id", "bytea"},
                                                   {"state", "smallint"},
                                                   {"fingerprint", "bytea"},
                                                   {"token", "bytea"},
                                                   {"locked_until", "bigint"},
                                                   {"expires_at", "bigint"},
                                                   {"takeover", "boolean"},
                                                   {"record", "bytea"}}));
  EXPECT_EQ(Query("SELECT indexname FROM pg_indexes WHERE tablename = $1 "
                  "ORDER BY indexname",
                  {table_}),
            (std::vector<std::vector<std::string>>{{table_ + "_expires_at"},
                                                   {table_ + "_pkey"}}));
}

TEST_F(PostgresStoreTest, StoresOpeningAtOnceOnAFreshTableAllSucceed) {
  constexpr int kTables = 5;
  constexpr int kStores = 4;
  for (int round = 0; round < kTables; ++round) {
    const std::string table = NewTable();
    std::vector<std::unique_ptr<Store>> stores(kStores);
    std::vector<std::string> errors(kStores);
    std::barrier<> start(kStores);
    std::vector<std::thread> threads;
    for (int i = 0; i < kStores; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        auto store = OpenStore(Uri(table));
        if (store.has_value()) {
          stores[i] = std::move(*store);
        } else {
          errors[i] = store.error().ToString();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < kStores; ++i) {
      ASSERT_NE(stores[i], nullptr) << "round " << round << ": " << errors[i];
    }
    EXPECT_EQ(Query("SELECT count(*) FROM idem_schema_versions "
                    "WHERE table_name = $1",
                    {table}),
              (std::vector<std::vector<std::string>>{{"1"}}));
    // One schema they all use.
    auto claim = stores[0]->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    for (int i = 1; i < kStores; ++i) {
      auto other = stores[i]->Claim(Id(1), Fp(1), kT0, kTtl, kLock);
      ASSERT_TRUE(other.has_value()) << other.error().ToString();
      EXPECT_EQ(other->outcome, ClaimOutcome::kInProgress);
    }
  }
}

TEST_F(PostgresStoreTest, AForeignTableOfThatNameIsRefused) {
  auto conn = Connect(base_);
  ASSERT_TRUE(Exec(conn.get(), "CREATE TABLE \"" + table_ + "\" (x int)"));
  auto store = OpenStore(Uri(table_));
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(store.error().message(), HasSubstr("not an idem table"));
}

TEST_F(PostgresStoreTest, ANewerSchemaVersionIsRefused) {
  ASSERT_NE(Open(), nullptr);
  Query("UPDATE idem_schema_versions SET version = 99 WHERE table_name = $1",
        {table_});
  auto store = OpenStore(Uri(table_));
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(store.error().message(), HasSubstr("newer"));
}

// Another session holds the schema lock (an instance creating or migrating
// a table takes it for as long as that takes). An open of a table already
// at this build's version finds it by reads and takes no lock, so it does
// not wait, even with a statement timeout far shorter than the hold; an
// open that has a table to create waits for the lock, and times out.
TEST_F(PostgresStoreTest, AnUpToDateTableOpensWithoutWaitingForTheSchemaLock) {
  ASSERT_NE(Open(), nullptr);  // Creates the table.
  const std::string key = std::to_string(postgres_internal::kSchemaLockKey);
  Conn holder = Connect(base_);
  ASSERT_TRUE(Exec(holder.get(), "SELECT pg_advisory_lock(" + key + ")"));
  EXPECT_NE(Open("statement_timeout_ms=500"), nullptr);
  const std::string fresh = NewTable();
  auto waited = OpenStore(Uri(fresh, "statement_timeout_ms=500"),
                          {.sweep_interval = Duration::zero()});
  ASSERT_FALSE(waited.has_value());
  EXPECT_EQ(waited.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(waited.error().message(), HasSubstr("schema: "));
  EXPECT_EQ(Query("SELECT to_regclass($1) IS NULL", {fresh}),
            (std::vector<std::vector<std::string>>{{"t"}}));
  ASSERT_TRUE(Exec(holder.get(), "SELECT pg_advisory_unlock(" + key + ")"));
  EXPECT_NE(OpenTable(fresh), nullptr);
}

TEST_F(PostgresStoreTest, ReopeningKeepsEveryRecord) {
  Token held;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 10; ++i) {
      auto claim = store->Claim(Id(i), Fp(i), kT0, kTtl, kLock);
      ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
      ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
      auto done = store->Complete(Id(i), claim->token,
                                  Created("body " + std::to_string(i)));
      ASSERT_TRUE(done.has_value() && *done);
    }
    auto claim = store->Claim(Id(100), Fp(100), kT0, kTtl, kLock);
    ASSERT_TRUE(claim.has_value());
    held = claim->token;
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 10; ++i) {
    auto claim = store->Claim(Id(i), Fp(i), kT0 + seconds(1), kTtl, kLock);
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    ASSERT_EQ(claim->outcome, ClaimOutcome::kCompleted);
    EXPECT_EQ(claim->response->body, "body " + std::to_string(i));
  }
  // A claim made before the reopen can still be completed (the new store
  // has not seen it: the Complete reads the row first).
  auto done = store->Complete(Id(100), held, Created("late"));
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
  auto record = store->Inspect(Id(100), kT0);
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kCompleted);
  EXPECT_EQ((*record)->expires_at, kT0 + kTtl);
}

TEST_F(PostgresStoreTest, AClaimOfAnotherStoreCanBeCompletedAndReleased) {
  testing::ExpectAClaimOfAnotherStoreCanBeCompletedAndReleased(
      [&] { return Open(); });
}

TEST_F(PostgresStoreTest, ACompleteAfterARenewalElsewhereStaysReadable) {
  testing::ExpectACompleteAfterARenewalElsewhereStaysReadable(
      [&] { return Open(); });
}

// One row update per renewal, counted by a trigger on the table.
TEST_F(PostgresStoreTest, ARenewalUpdatesOneRow) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto conn = Connect(base_);
  const std::string t = "\"" + table_ + "\"";
  const std::string counter = "\"" + table_ + "_writes\"";
  const std::string fn = "\"" + table_ + "_count\"";
  testing::ExpectOneRowWrittenPerRenewal(
      *store, Id(1), Fp(1),
      [&] {
        ASSERT_TRUE(
            Exec(conn.get(), "CREATE TABLE " + counter + " (n bigint)"));
        ASSERT_TRUE(Exec(conn.get(), "INSERT INTO " + counter + " VALUES (0)"));
        ASSERT_TRUE(Exec(conn.get(), "CREATE FUNCTION " + fn +
                                         "() RETURNS trigger LANGUAGE plpgsql "
                                         "AS $$BEGIN UPDATE " +
                                         counter +
                                         " SET n = n + 1; RETURN NULL; END$$"));
        ASSERT_TRUE(Exec(conn.get(),
                         "CREATE TRIGGER count_writes AFTER INSERT OR "
                         "UPDATE OR DELETE ON " +
                             t + " FOR EACH ROW EXECUTE FUNCTION " + fn +
                             "()"));
      },
      [&] {
        std::string n;
        PGresult* r = PQexec(conn.get(), ("SELECT n FROM " + counter).c_str());
        EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK)
            << PQresultErrorMessage(r);
        if (PQresultStatus(r) == PGRES_TUPLES_OK) n = PQgetvalue(r, 0, 0);
        PQclear(r);
        return n;
      });
  // The trigger goes with its function; TearDown drops the table.
  EXPECT_TRUE(Exec(conn.get(), "DROP FUNCTION " + fn + " CASCADE"));
  EXPECT_TRUE(Exec(conn.get(), "DROP TABLE " + counter));
}

TEST_F(PostgresStoreTest, ADamagedRecordIsDataLossNeverAMiss) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 3; ++i) {
    auto claim = store->Claim(Id(i), Fp(i), kT0, kTtl, kLock);
    ASSERT_TRUE(claim.has_value());
    ASSERT_TRUE(store->Complete(Id(i), claim->token, Created()).has_value());
  }
  auto conn = Connect(base_);
  const std::string t = "\"" + table_ + "\"";
  // 0: a flipped byte in the record (its checksum fails).
  ASSERT_TRUE(Exec(conn.get(), "UPDATE " + t +
                                   " SET record = set_byte(record, 40, "
                                   "get_byte(record, 40) # 255) WHERE id = '" +
                                   Hex(Id(0).view()) + "'"));
  // 1: a truncated record.
  ASSERT_TRUE(Exec(conn.get(), "UPDATE " + t +
                                   " SET record = substr(record, 1, 20) "
                                   "WHERE id = '" +
                                   Hex(Id(1).view()) + "'"));
  // 2: columns that disagree with the record.
  ASSERT_TRUE(Exec(conn.get(), "UPDATE " + t +
                                   " SET locked_until = locked_until + 1 "
                                   "WHERE id = '" +
                                   Hex(Id(2).view()) + "'"));
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    auto claim = store->Claim(Id(i), Fp(i), kT0, kTtl, kLock);
    ASSERT_FALSE(claim.has_value());
    EXPECT_EQ(claim.error().code(), ErrorCode::kDataLoss);
    EXPECT_THAT(claim.error().message(), HasSubstr(table_));
    auto record = store->Inspect(Id(i), kT0);
    ASSERT_FALSE(record.has_value());
    EXPECT_EQ(record.error().code(), ErrorCode::kDataLoss);
    // A Complete by a store that did not make the claim reads the row.
    auto other = Open();
    ASSERT_NE(other, nullptr);
    auto done = other->Complete(Id(i), Token{}, Created());
    ASSERT_FALSE(done.has_value());
    EXPECT_EQ(done.error().code(), ErrorCode::kDataLoss);
    auto extend = store->ExtendLock(Id(i), Token{}, kT0, kLock);
    ASSERT_FALSE(extend.has_value());
    EXPECT_EQ(extend.error().code(), ErrorCode::kDataLoss);
  }
  // An operator revokes a damaged row; the key can then run again.
  auto revoked = store->Revoke(Id(0));
  ASSERT_TRUE(revoked.has_value()) << revoked.error().ToString();
  EXPECT_TRUE(*revoked);
  auto again = store->Claim(Id(0), Fp(0), kT0, kTtl, kLock);
  ASSERT_TRUE(again.has_value()) << again.error().ToString();
  EXPECT_EQ(again->outcome, ClaimOutcome::kAcquired);
  EXPECT_FALSE(again->takeover);
  // Expired by its columns, a damaged row is purged like any other.
  auto purged = store->PurgeExpired(kT0 + kTtl, 100);
  ASSERT_TRUE(purged.has_value()) << purged.error().ToString();
  EXPECT_EQ(*purged, 3u);
}

// The claim's retry path, forced: each attempt's insert meets a live row,
// which vanishes (another instance revoked or released it) before the
// SELECT reads it, and is back before the next attempt's insert.
TEST_F(PostgresStoreTest, AClaimThatLosesEveryRaceIsInProgressNotAnError) {
  auto opened = Open();
  ASSERT_NE(opened, nullptr);
  auto* store = dynamic_cast<PostgresStore*>(opened.get());
  ASSERT_NE(store, nullptr);
  const std::string t = "\"" + table_ + "\"";
  const std::string saved = NewTable();
  auto conn = Connect(base_);
  testing::ExpectEveryLostRaceIsInProgress<PostgresStoreTestPeer>(
      *store,
      {.save =
           [&] {
             EXPECT_TRUE(Exec(conn.get(), "CREATE TABLE \"" + saved +
                                              "\" AS SELECT * FROM " + t));
           },
       .restore =
           [&] {
             EXPECT_TRUE(
                 Exec(conn.get(),
                      "INSERT INTO " + t + " SELECT * FROM \"" + saved + "\""));
           },
       .delete_all =
           [&] { EXPECT_TRUE(Exec(conn.get(), "DELETE FROM " + t)); }});
}

// One lost race, then the key is free: the retry acquires.
TEST_F(PostgresStoreTest, AClaimWhoseObstacleVanishesOnceAcquiresOnRetry) {
  auto opened = Open();
  ASSERT_NE(opened, nullptr);
  auto* store = dynamic_cast<PostgresStore*>(opened.get());
  ASSERT_NE(store, nullptr);
  auto conn = Connect(base_);
  testing::ExpectOneLostRaceThenAcquires<PostgresStoreTestPeer>(*store, [&] {
    EXPECT_TRUE(Exec(conn.get(), "DELETE FROM \"" + table_ + "\""));
  });
}

TEST_F(PostgresStoreTest, TheClientKeyNeverReachesTheTable) {
  std::shared_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  auto guard = idem::testing::RunSecretRequestTwice(
      store, std::make_shared<ManualClock>(kT0));
  ASSERT_NE(guard, nullptr);

  // Every column of every row, as bytes.
  const std::string everything =
      "SELECT count(*) FROM \"" + table_ +
      "\" WHERE position(convert_to($1, 'UTF8') IN id || fingerprint || "
      "token || record || int8send(locked_until) || int8send(expires_at)) > 0";
  EXPECT_EQ(Query(everything, {std::string(testing::kSecretKey)})[0][0], "0");
  EXPECT_EQ(Query(everything, {std::string(testing::kSecretScope)})[0][0], "0");
  EXPECT_EQ(Query(everything, {std::string(testing::kSecretBody)})[0][0], "0");
  EXPECT_EQ(Query(everything, {std::string(testing::kStoredBody)})[0][0], "1")
      << "no record written?";
}

// Two stores, each with its own pool (as two server instances would have),
// 32 threads claiming one absent id at once: exactly one Acquired, 200
// times.
TEST_F(PostgresStoreTest, ThirtyTwoThreadsOnTwoStoresAcquireOneIdOnce) {
  constexpr int kThreads = 32;
  constexpr int kRounds = 200;
  std::unique_ptr<Store> stores[2] = {
      Open("pool=4&acquire_timeout_ms=120000&statement_timeout_ms=60000"),
      Open("pool=4&acquire_timeout_ms=120000&statement_timeout_ms=60000")};
  ASSERT_NE(stores[0], nullptr);
  ASSERT_NE(stores[1], nullptr);
  struct Seen {
    bool ok = false;
    ClaimOutcome outcome = ClaimOutcome::kAcquired;
    Token token;
    std::string error;
  };
  std::vector<Seen> seen(kThreads * kRounds);
  std::barrier<> start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        start.arrive_and_wait();
        auto claim =
            stores[t % 2]->Claim(Id(5000 + round), Fp(7), kT0, kTtl, kLock);
        Seen& out = seen[round * kThreads + t];
        out.ok = claim.has_value();
        if (out.ok) {
          out.outcome = claim->outcome;
          out.token = claim->token;
        } else {
          out.error = claim.error().ToString();
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int round = 0; round < kRounds; ++round) {
    int acquired = 0;
    Token winner;
    for (int t = 0; t < kThreads; ++t) {
      const Seen& s = seen[round * kThreads + t];
      ASSERT_TRUE(s.ok) << "round " << round << " thread " << t << ": "
                        << s.error;
      if (s.outcome == ClaimOutcome::kAcquired) {
        ++acquired;
        winner = s.token;
      } else {
        EXPECT_EQ(s.outcome, ClaimOutcome::kInProgress);
      }
    }
    ASSERT_EQ(acquired, 1) << "round " << round;
    auto record = stores[round % 2]->Inspect(Id(5000 + round), kT0);
    ASSERT_TRUE(record.has_value() && record->has_value());
    EXPECT_EQ((*record)->token, winner);
  }
}

// Holds the row lock of `id` in `table` from a transaction of its own, so
// that a claim of that id waits for it inside the server.
class RowLock {
 public:
  RowLock(const std::string& uri, const std::string& table, const RecordId& id)
      : conn_(Connect(uri)) {
    held_ = Exec(conn_.get(), "BEGIN") &&
            Exec(conn_.get(), "SELECT 1 FROM \"" + table + "\" WHERE id = '" +
                                  Hex(id.view()) + "' FOR UPDATE");
  }
  ~RowLock() { Unlock(); }
  bool held() const { return held_; }
  void Unlock() {
    if (held_) Exec(conn_.get(), "ROLLBACK");
    held_ = false;
  }

 private:
  Conn conn_;
  bool held_ = false;
};

// Id(1) claimed at kT0, and then its row locked from a transaction of
// another connection: a takeover of Id(1) at kT0 + kLock waits inside the
// server until lock.Unlock().
struct LockedClaim {
  Result<ClaimResult> claim;
  RowLock lock;
};

// Whether a statement of application `idem` waits for a lock on the server.
bool IdemStatementWaits(const std::string& base) {
  auto rows = PostgresQuery(
      base,
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'idem' "
      "AND wait_event_type = 'Lock'");
  return !rows.empty() && rows[0][0] != "0";
}

LockedClaim ClaimAndLock(Store& store, const std::string& base,
                         const std::string& table) {
  return {store.Claim(Id(1), Fp(1), kT0, kTtl, kLock),
          RowLock(base, table, Id(1))};
}

TEST_F(PostgresStoreTest, AFullPoolIsUnavailableAfterTheAcquireTimeout) {
  auto store = Open("pool=1&acquire_timeout_ms=300&statement_timeout_ms=60000");
  ASSERT_NE(store, nullptr);
  LockedClaim locked = ClaimAndLock(*store, base_, table_);
  ASSERT_TRUE(locked.claim.has_value() && locked.lock.held());
  // The only connection waits for the row lock inside the server.
  std::optional<Result<ClaimResult>> blocked;
  std::thread holder(
      [&] { blocked = store->Claim(Id(1), Fp(1), kT0 + kLock, kTtl, kLock); });
  ASSERT_TRUE(testing::WaitFor([&] { return IdemStatementWaits(base_); }));
  const auto start = std::chrono::steady_clock::now();
  auto other = store->Claim(Id(2), Fp(2), kT0, kTtl, kLock);
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(other.error().message(), HasSubstr("acquire_timeout=300 ms"));
  EXPECT_GE(waited, milliseconds(300));
  EXPECT_LT(waited, seconds(30));
  locked.lock.Unlock();
  holder.join();
  ASSERT_TRUE(blocked.has_value());
  ASSERT_TRUE(blocked->has_value()) << blocked->error().ToString();
  EXPECT_EQ((*blocked)->outcome, ClaimOutcome::kAcquired);
  EXPECT_TRUE((*blocked)->takeover);
  // The pool works again.
  other = store->Claim(Id(2), Fp(2), kT0, kTtl, kLock);
  ASSERT_TRUE(other.has_value()) << other.error().ToString();
}

TEST_F(PostgresStoreTest, AStatementBlockedInTheServerTimesOutUnavailable) {
  // The table first, with the default timeouts: creating it waits for the
  // schema lock, which other tests creating theirs may hold for longer
  // than 500 ms on a loaded machine.
  ASSERT_NE(Open(), nullptr);
  auto store = Open("statement_timeout_ms=500");
  ASSERT_NE(store, nullptr);
  LockedClaim locked = ClaimAndLock(*store, base_, table_);
  ASSERT_TRUE(locked.claim.has_value() && locked.lock.held());
  const auto start = std::chrono::steady_clock::now();
  auto blocked = store->Claim(Id(1), Fp(1), kT0 + kLock, kTtl, kLock);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(30));
  ASSERT_FALSE(blocked.has_value());
  EXPECT_EQ(blocked.error().code(), ErrorCode::kUnavailable)
      << blocked.error().ToString();
  EXPECT_THAT(blocked.error().message(), HasSubstr("SQLSTATE"));
  // Nothing was written, and the store still works.
  locked.lock.Unlock();
  auto done = store->Complete(Id(1), locked.claim->token, Created());
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
}

TEST_F(PostgresStoreTest, PurgeExpiredDeletesOnlyExpiredRowsInBatches) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  // 2500 records expire at kT0 + 1 s, 100 live on; a few are completed.
  constexpr int kExpired = 2500;
  constexpr int kLive = 100;
  for (int i = 0; i < kExpired + kLive; ++i) {
    const Duration ttl = i < kExpired ? seconds(1) : kTtl;
    auto claim = store->Claim(Id(i), Fp(i), kT0, ttl, seconds(1));
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    if (i % 7 == 0) {
      ASSERT_TRUE(store->Complete(Id(i), claim->token, Created()).has_value());
    }
  }
  const TimePoint later = kT0 + seconds(2);
  // A limit inside the second batch.
  auto purged = store->PurgeExpired(later, 1200);
  ASSERT_TRUE(purged.has_value()) << purged.error().ToString();
  EXPECT_EQ(*purged, 1200u);
  // A row someone holds locked is skipped, not waited for.
  const auto left = Query("SELECT encode(id, 'hex') FROM \"" + table_ +
                              "\" WHERE expires_at < $1 LIMIT 1",
                          {NanosText(later)});
  ASSERT_EQ(left.size(), 1u);
  RecordId locked;
  ASSERT_TRUE(locked.Assign(Unhex(left[0][0])));
  RowLock lock(base_, table_, locked);
  ASSERT_TRUE(lock.held());
  purged = store->PurgeExpired(later, 100000);
  ASSERT_TRUE(purged.has_value()) << purged.error().ToString();
  EXPECT_EQ(*purged, kExpired - 1200u - 1);
  lock.Unlock();
  purged = store->PurgeExpired(later, 100000);
  ASSERT_TRUE(purged.has_value());
  EXPECT_EQ(*purged, 1u);
  EXPECT_EQ(Query("SELECT count(*) FROM \"" + table_ + "\"")[0][0],
            std::to_string(kLive));
  for (int i = kExpired; i < kExpired + kLive; ++i) {
    auto record = store->Inspect(Id(i), later);
    ASSERT_TRUE(record.has_value() && record->has_value()) << i;
  }
}

// Several instances sweeping one table: a purge never waits for another's
// batch (its rows are skipped), and purges running at once delete every
// expired row exactly once between them.
TEST_F(PostgresStoreTest, PurgesOfTwoInstancesDoNotBlockEachOther) {
  auto a = Open("statement_timeout_ms=2000");
  auto b = Open("statement_timeout_ms=2000");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  constexpr int kExpired = 3000;
  constexpr int kLive = 50;
  const std::string t = "\"" + table_ + "\"";
  // Rows straight into the table (3000 claims would take a while): every
  // column but the record is what the purge reads.
  auto conn = Connect(base_);
  ASSERT_TRUE(
      Exec(conn.get(),
           "INSERT INTO " + t +
               " (id, state, fingerprint, token, locked_until, expires_at, "
               "takeover, record) SELECT sha256(int8send(g)), 2, '\\x00', "
               "'\\x00', " +
               NanosText(kT0) + ", CASE WHEN g < " + std::to_string(kExpired) +
               " THEN " + NanosText(kT0 + seconds(1)) + " ELSE " +
               NanosText(kT0 + kTtl) +
               " END, false, '\\x00' FROM generate_series(0, " +
               std::to_string(kExpired + kLive - 1) + ") g"));
  const TimePoint later = kT0 + seconds(2);

  // Another instance's purge batch in flight: its rows stay locked until it
  // commits. This one deletes the rest instead of waiting (which would end
  // in the 2 s statement timeout).
  auto other = Connect(base_);
  ASSERT_TRUE(Exec(other.get(), "BEGIN"));
  ASSERT_TRUE(Exec(other.get(), "DELETE FROM " + t +
                                    " WHERE id IN (SELECT id "
                                    "FROM " +
                                    t +
                                    " WHERE expires_at <= " + NanosText(later) +
                                    " LIMIT 1000 FOR UPDATE SKIP LOCKED)"));
  auto purged = a->PurgeExpired(later, 100000);
  ASSERT_TRUE(purged.has_value()) << purged.error().ToString();
  EXPECT_EQ(*purged, kExpired - 1000u);
  ASSERT_TRUE(Exec(other.get(), "ROLLBACK"));

  // Two purges at once, in batches, over the 1000 rows left.
  std::optional<Result<std::size_t>> ra, rb;
  std::barrier start(2);
  std::thread ta([&] {
    start.arrive_and_wait();
    ra = a->PurgeExpired(later, 100000);
  });
  std::thread tb([&] {
    start.arrive_and_wait();
    rb = b->PurgeExpired(later, 100000);
  });
  ta.join();
  tb.join();
  ASSERT_TRUE(ra->has_value()) << ra->error().ToString();
  ASSERT_TRUE(rb->has_value()) << rb->error().ToString();
  EXPECT_EQ(**ra + **rb, 1000u);
  EXPECT_EQ(Query("SELECT count(*) FROM " + t)[0][0], std::to_string(kLive));
}

}  // namespace
}  // namespace idem
