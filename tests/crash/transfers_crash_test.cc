// Exactly once, shown by crashes: idem-demo's POST /transfers on SQLite and
// PostgreSQL, aborted (X-Demo-Crash) right after the business commit or just
// before it, restarted on the same file (database) and retried without the
// header, twenty rounds per store and mode (IDEM_CRASH_ROUNDS overrides,
// crash_rounds.h).
//
//  - --exactly-once, after_commit: the record was completed in the business
//    transaction, so the retry is a replay of the stored 201 and the table
//    gained exactly one row; the restarted process never ran the handler.
//  - --exactly-once, before_commit: neither the row nor the completion
//    committed; the claim (outside the transaction) holds the key until
//    --lock-timeout, then the retry runs the handler again: one row.
//  - without --exactly-once, after_commit: the row committed but the record
//    was still in progress, so the retry after the lock timeout runs the
//    handler a second time: two rows. This is the at-most-once-per-key gap
//    that exactly-once closes.
//
// Counts are deltas of the rows the case's own transfers added: on SQLite,
// GET /transfers/count of the case's own file; on PostgreSQL, whose
// `transfers` table every case (and earlier runs) share, the rows whose body
// is the case's own (each case posts a body of its own), counted in SQL. So
// the cases may run beside each other. Waits are WaitFor polls with
// generous deadlines; the lock timeout is short (--lock-timeout 0.5). The
// PostgreSQL case uses the shared test server (IDEM_TEST_POSTGRES_URI;
// skipped without it, failed under CI) and a records table of its own.

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "crash_rounds.h"
#include "support/built_path.h"
#include "support/demo_http_flags.h"
#include "support/demo_process.h"
#ifdef IDEM_CRASH_TEST_POSTGRES
#include "postgres_test_util.h"
#endif

// In the process helpers' namespace (support/demo_process.h), which the
// tests use unqualified, as they do TempDir.
namespace idem::testing::proc {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr int kDefaultRounds = 20;

// POST /transfers with `key` and `body`, and X-Demo-Crash: `crash` unless
// empty.
std::optional<HttpResponse> PostTransfer(std::uint16_t port,
                                         const std::string& key,
                                         const std::string& body,
                                         std::string_view crash) {
  std::string request = RawRequest("POST", "/transfers", key, body);
  if (!crash.empty()) {
    const std::string marker = "Connection: close\r\n";
    request.insert(request.find(marker) + marker.size(),
                   "X-Demo-Crash: " + std::string(crash) + "\r\n");
  }
  const int fd = Connect(port);
  if (fd < 0) return std::nullopt;
  std::optional<HttpResponse> r;
  if (WriteAll(fd, request)) r = ReadResponse(fd, Clock::now() + seconds(60));
  ::close(fd);
  return r;
}

long long TransferCount(std::uint16_t port) {
  auto r = Send(port, "GET", "/transfers/count", "", "");
  if (!r || r->status != 200) return -1;
  const std::size_t colon = r->body.find(':');
  if (colon == std::string::npos) return -1;
  return std::stoll(r->body.substr(colon + 1));
}

struct StoreCase {
  const char* name;
};

// Each store on each --http server the build has (DemoHttpFlags).
class TransfersCrashTest
    : public ::testing::TestWithParam<std::tuple<StoreCase, std::string>> {
 protected:
  void SetUp() override {
    // abort() is the crash: no core files.
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (std::string_view(StoreParam().name) == "sqlite") {
      uri_ = "sqlite:" + (dir_.path() / "idem.db").string();
      return;
    }
#ifdef IDEM_CRASH_TEST_POSTGRES
    IDEM_REQUIRE_TEST_POSTGRES();
    table_ = idem::testing::UniquePostgresTable("xcrash");
    body_ = "{\"case\":\"" + table_ + "\"}";
    uri_ = idem::testing::WithParams(idem::testing::PostgresTestUri(),
                                     "table=" + table_);
#else
    GTEST_SKIP() << "built without the PostgreSQL store";
#endif
  }

  void TearDown() override {
#ifdef IDEM_CRASH_TEST_POSTGRES
    if (!table_.empty()) idem::testing::DropPostgresTable(uri_, table_);
#endif
  }

  // A fresh demo on the case's store; its port, 0 when it did not start.
  std::uint16_t Start(bool exactly_once) {
    demo_.reset();
    std::vector<std::string> args = {"--lock-timeout", "0.5", "--http",
                                     std::get<1>(GetParam())};
    if (exactly_once) args.push_back("--exactly-once");
    demo_.emplace(::idem::testing::BuiltPath(IDEM_DEMO_PATH), uri_,
                  dir_.path() / "demo.log", args);
    const std::uint16_t port = demo_->WaitListening();
    EXPECT_NE(port, 0) << ReadFile(dir_.path() / "demo.log");
    return port;
  }

  // The rows the case's transfers added to the table so far (from a
  // baseline: deltas are what count); -1 when it cannot tell.
  long long Rows(std::uint16_t port) {
#ifdef IDEM_CRASH_TEST_POSTGRES
    if (!table_.empty()) {
      const auto rows = idem::testing::PostgresQuery(
          uri_, "SELECT count(*) FROM transfers WHERE body = $1", {body_});
      if (rows.size() != 1 || rows[0].size() != 1) return -1;
      return std::stoll(rows[0][0]);
    }
#endif
    return TransferCount(port);
  }

  // The retry after a crash, repeated while the dead request's lock holds
  // (409), for at most a generous minute.
  std::optional<HttpResponse> RetryUntilAnswered(std::uint16_t port,
                                                 const std::string& key) {
    std::optional<HttpResponse> r;
    WaitFor(
        [&] {
          r = PostTransfer(port, key, body_, "");
          return r.has_value() && r->status != 409;
        },
        std::chrono::minutes(1));
    return r;
  }

  // One crash round: `crash` with a new key, restart, retry; the rows the
  // table gained and whether the retry was a replay.
  struct Round {
    long long rows = -1;
    std::optional<HttpResponse> retry;
    int runs_after_restart = -1;
  };
  Round CrashAndRetry(bool exactly_once, std::string_view crash, int n) {
    Round round;
    std::uint16_t port = Start(exactly_once);
    if (port == 0) return round;
    const long long before = Rows(port);
    const std::string key =
        "\"" + std::string(StoreParam().name) + "-" + std::string(crash) + "-" +
        (exactly_once ? "x" : "c") + "-" + std::to_string(n) + "-" +
        std::to_string(::getpid()) + "\"";
    const auto crashed = PostTransfer(port, key, body_, crash);
    EXPECT_FALSE(crashed.has_value())
        << "the demo answered instead of aborting: " << Describe(crashed);
    port = Start(exactly_once);
    if (port == 0) return round;
    round.retry = RetryUntilAnswered(port, key);
    round.runs_after_restart = HandlerRuns(port);
    round.rows = Rows(port) - before;
    return round;
  }

  const StoreCase& StoreParam() const { return std::get<0>(GetParam()); }

  TempDir dir_{"idem-transfers-crash"};
  std::string uri_;
  std::string table_;
  // What the case's transfers post: on PostgreSQL its own, so that its rows
  // can be told from every other case's.
  std::string body_ = "{}";
  std::optional<DemoProcess> demo_;
};

TEST_P(TransfersCrashTest, ExactlyOnceCrashAfterCommitReplaysTheStoredAnswer) {
  const int rounds = CrashRounds(kDefaultRounds);
  for (int i = 0; i < rounds; ++i) {
    SCOPED_TRACE("round " + std::to_string(i));
    const Round round = CrashAndRetry(true, "after_commit", i);
    ASSERT_TRUE(round.retry.has_value());
    EXPECT_EQ(round.retry->status, 201) << Describe(round.retry);
    EXPECT_EQ(round.retry->Header("Idempotent-Replayed"), "true")
        << Describe(round.retry);
    EXPECT_NE(round.retry->body.find("\"id\":\"t"), std::string::npos);
    EXPECT_EQ(round.runs_after_restart, 0);
    EXPECT_EQ(round.rows, 1);
    if (HasFailure()) break;
  }
}

TEST_P(TransfersCrashTest, ExactlyOnceCrashBeforeCommitRunsAgainOnce) {
  const int rounds = CrashRounds(kDefaultRounds);
  for (int i = 0; i < rounds; ++i) {
    SCOPED_TRACE("round " + std::to_string(i));
    const Round round = CrashAndRetry(true, "before_commit", i);
    ASSERT_TRUE(round.retry.has_value());
    EXPECT_EQ(round.retry->status, 201) << Describe(round.retry);
    EXPECT_EQ(round.retry->Header("Idempotent-Replayed"), "")
        << Describe(round.retry);
    EXPECT_EQ(round.runs_after_restart, 1);
    EXPECT_EQ(round.rows, 1);
    if (HasFailure()) break;
  }
}

// The difference: completing after the commit, as /orders does, leaves a
// window in which a crash makes the retry run the handler a second time.
TEST_P(TransfersCrashTest, WithoutExactlyOnceCrashAfterCommitRunsTwice) {
  const int rounds = CrashRounds(kDefaultRounds);
  for (int i = 0; i < rounds; ++i) {
    SCOPED_TRACE("round " + std::to_string(i));
    const Round round = CrashAndRetry(false, "after_commit", i);
    ASSERT_TRUE(round.retry.has_value());
    EXPECT_EQ(round.retry->status, 201) << Describe(round.retry);
    EXPECT_EQ(round.retry->Header("Idempotent-Replayed"), "")
        << Describe(round.retry);
    EXPECT_EQ(round.runs_after_restart, 1);
    EXPECT_EQ(round.rows, 2);
    if (HasFailure()) break;
  }
}

const StoreCase kCases[] = {{"sqlite"}, {"postgres"}};

INSTANTIATE_TEST_SUITE_P(
    Stores, TransfersCrashTest,
    ::testing::Combine(::testing::ValuesIn(kCases),
                       ::testing::ValuesIn(idem::testing::DemoHttpFlags())),
    StoreAndHttpName<StoreCase>);

}  // namespace
}  // namespace idem::testing::proc
