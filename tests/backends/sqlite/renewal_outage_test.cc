// Lock renewal through a real store outage: a SQLite file held by another
// connection's exclusive transaction, so every renewal fails with
// kUnavailable after busy_timeout, then released. One trial on the system
// clock: the renewal retries (GuardOptions::lock_renewal_retry) reach the
// store within a fraction of lock_renewal after the thaw, the handler is
// told meanwhile (ClaimHandle::lock_state), and a retry after that renewal
// gets 409. The window over many trials is measured in
// tests/core/renewal_outage_test.cc.

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "idem/guard.h"
#include "idem/open_store.h"
#include "support/renewal_counter.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RenewalCounter;
using testing::WaitFor;

bool Exec(sqlite3* db, const char* sql) {
  return sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

TEST(SqliteRenewalOutageTest, RenewalRetryReachesTheStoreSoonAfterItReturns) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "idem.db").string();
  auto store = OpenStore("sqlite:" + path + "?busy_timeout_ms=100");
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  auto counter = std::make_shared<RenewalCounter>();
  GuardSetup setup;
  setup.store = std::move(*store);
  // A renewal interval long enough that waiting for the next one (the
  // behaviour before lock_renewal_retry: about 4 s after the thaw here)
  // cannot pass for a retry (default 50 ms, plus busy_timeout).
  setup.options.lock_timeout = seconds(12);
  setup.options.lock_renewal = seconds(4);
  setup.observers.push_back(counter);
  auto guard = Guard::Create(std::move(setup));
  ASSERT_TRUE(guard.has_value()) << guard.error().ToString();

  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &other), SQLITE_OK);
  const HeaderView header[] = {{"Idempotency-Key", "outage"}};
  RequestView request;
  request.method = "POST";
  request.target = "/orders";
  request.headers = std::span<const HeaderView>(header, 1);
  RunInfo info;
  (*guard)->Run(
      request,
      [&](ClaimHandle& claim) {
        EXPECT_EQ(claim.lock_state(), LockState::kHeld);
        // The outage: every write waits busy_timeout, then fails.
        EXPECT_TRUE(Exec(other, "BEGIN EXCLUSIVE"));
        EXPECT_TRUE(WaitFor([&] { return counter->store_failed >= 2; }))
            << "no failed renewal and retry";
        EXPECT_TRUE(claim.LockMayBeLost());
        EXPECT_TRUE(Exec(other, "COMMIT"));
        const auto thawed = std::chrono::steady_clock::now();
        EXPECT_TRUE(WaitFor([&] { return counter->renewed >= 1; }));
        const auto gap = std::chrono::steady_clock::now() - thawed;
        std::printf("first renewal %lld ms after the thaw\n",
                    static_cast<long long>(
                        std::chrono::duration_cast<milliseconds>(gap).count()));
        // Generous for a loaded machine; waiting for the next lock_renewal
        // would take about 4 s.
        EXPECT_LT(gap, seconds(2));
        EXPECT_EQ(claim.lock_state(), LockState::kHeld);
        Decision retry = (*guard)->Begin(request);
        EXPECT_EQ(retry.outcome, Outcome::kConflict);
        return Response{201, {}, "order"};
      },
      nullptr, &info);
  sqlite3_close(other);
  ASSERT_TRUE(info.finish.has_value());
  EXPECT_EQ(*info.finish, FinishResult::kStored);
  EXPECT_EQ((*guard)->metrics().Get(Outcome::kTakeover), 0u);
}

}  // namespace
}  // namespace idem
