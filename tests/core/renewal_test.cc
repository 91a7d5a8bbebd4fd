// Lock renewal (GuardOptions::lock_renewal): ClaimLease, and the renewal
// thread of Guard::Run and RunOnce, driven by a ManualClock.

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "idem/claim_lease.h"
#include "idem/guard.h"
#include "idem/once.h"
#include "renewal_bench.h"
#include "support/renewal_counter.h"
#include "support/renewal_test_store.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RenewalCounter;
using testing::WaitFor;

GuardOptions RenewingOptions() {
  GuardOptions options;
  options.lock_timeout = seconds(1);
  options.lock_renewal = milliseconds(300);
  return options;
}

class RenewalTest : public ::testing::Test {
 protected:
  void SetUp() override { Rebuild(RenewingOptions()); }

  void Rebuild(GuardOptions options) {
    Status built = bench_.Rebuild(
        std::move(options), [this](LogLevel level, std::string_view message) {
          std::lock_guard<std::mutex> lock(log_mu_);
          logs_.push_back({level, std::string(message)});
        });
    ASSERT_TRUE(built.has_value()) << built.error().ToString();
  }

  static RequestView Request(const HeaderView* key) {
    return testing::RenewalBench::Request(key, "tenant");
  }

  Decision Begin(std::string_view key) { return bench_.Begin(key, "tenant"); }

  // Guard::Run for `key` with `handler` (which returns the body of a 201).
  template <typename Body>
  Response Run(std::string_view key, Body&& body, RunInfo* info = nullptr) {
    const HeaderView header[] = {{"Idempotency-Key", key}};
    return bench_.guard->Run(
        Request(header),
        [&] {
          return Response{201, {}, body()};
        },
        nullptr, info);
  }

  bool Logged(LogLevel level, std::string_view text) {
    std::lock_guard<std::mutex> lock(log_mu_);
    for (const auto& [l, message] : logs_) {
      if (l == level && message.find(text) != std::string::npos) return true;
    }
    return false;
  }

  // Advances the clock by one renewal interval and waits until the renewal
  // thread has made `total` renewals.
  void RenewTo(int total) {
    bench_.clock->Advance(milliseconds(300));
    ASSERT_TRUE(WaitFor([&] {
      return bench_.counter->renewed.load() >= total;
    })) << "renewals: "
        << bench_.counter->renewed.load() << " of " << total;
  }

  testing::RenewalBench bench_;
  std::mutex log_mu_;
  std::vector<std::pair<LogLevel, std::string>> logs_;
};

TEST(RenewalOptionsTest, ValidateNamesLockRenewal) {
  GuardOptions options;
  options.lock_timeout = seconds(1);
  options.lock_renewal = Duration::zero();
  EXPECT_TRUE(options.Validate().has_value());
  options.lock_renewal = milliseconds(999);
  EXPECT_TRUE(options.Validate().has_value());
  for (Duration bad : {Duration(milliseconds(-1)), Duration(seconds(1)),
                       Duration(seconds(2))}) {
    options.lock_renewal = bad;
    auto valid = options.Validate();
    ASSERT_FALSE(valid.has_value());
    EXPECT_EQ(valid.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(valid.error().message().find("lock_renewal"), std::string::npos)
        << valid.error().message();
  }
  // Guard::Create and MakeRouteOptions refuse it too.
  EXPECT_FALSE(Guard::MakeRouteOptions(options).has_value());
}

TEST_F(RenewalTest, RenewExtendsTheLockToNowPlusLockTimeout) {
  Decision d = Begin("k1");
  ASSERT_EQ(d.action, Action::kExecute);
  EXPECT_EQ(d.claim.lock_renewal(), milliseconds(300));
  auto lease = d.claim.lease();
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ(lease, d.claim.lease());  // One lease per claim.
  EXPECT_EQ(lease->interval(), milliseconds(300));
  EXPECT_EQ(lease->record_id(), d.claim.record_id());
  bench_.clock->Advance(milliseconds(900));
  EXPECT_EQ(lease->Renew(), RenewResult::kRenewed);
  auto record = bench_.store->Inspect(d.claim.record_id(), bench_.clock->Now());
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->locked_until, bench_.clock->Now() + seconds(1));
  EXPECT_EQ(bench_.counter->renewed.load(), 1);
  // Past the original lock timeout, a retry still finds it in progress.
  bench_.clock->Advance(milliseconds(500));
  EXPECT_EQ(Begin("k1").outcome, Outcome::kConflict);
  EXPECT_EQ(d.claim.Finish(Response{201, {}, "order"}), FinishResult::kStored);
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kRenewalLost), 0u);
}

TEST_F(RenewalTest, LostClaimIsCountedLoggedAndFinishIsStale) {
  Decision d = Begin("k1");
  ASSERT_EQ(d.action, Action::kExecute);
  auto lease = d.claim.lease();
  // The holder stalled past its lock timeout; a retry took the key over.
  bench_.clock->Advance(seconds(2));
  Decision other = Begin("k1");
  ASSERT_EQ(other.action, Action::kExecute);
  ASSERT_TRUE(other.claim.takeover());
  EXPECT_EQ(lease->Renew(), RenewResult::kLost);
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kRenewalLost), 1u);
  EXPECT_EQ(bench_.counter->lost.load(), 1);
  EXPECT_TRUE(
      Logged(LogLevel::kWarning, "record " + d.claim.record_id().ToHex()));
  // Lost stays lost, without another store call or count.
  const int extends = bench_.store->Extends();
  EXPECT_EQ(lease->Renew(), RenewResult::kLost);
  EXPECT_EQ(bench_.store->Extends(), extends);
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kRenewalLost), 1u);
  EXPECT_EQ(d.claim.Finish(Response{201, {}, "late"}),
            FinishResult::kStaleComplete);
  EXPECT_EQ(other.claim.Finish(Response{201, {}, "order"}),
            FinishResult::kStored);
}

TEST_F(RenewalTest, StoreErrorKeepsTheClaim) {
  Decision d = Begin("k1");
  auto lease = d.claim.lease();
  bench_.store->fail_extend = true;
  EXPECT_EQ(lease->Renew(), RenewResult::kStoreFailed);
  EXPECT_EQ(bench_.counter->store_failed.load(), 1);
  EXPECT_TRUE(Logged(LogLevel::kError, "renewing a lock failed"));
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kRenewalLost), 0u);
  bench_.store->fail_extend = false;
  EXPECT_EQ(lease->Renew(), RenewResult::kRenewed);
  EXPECT_EQ(d.claim.Finish(Response{201, {}, "order"}), FinishResult::kStored);
}

TEST_F(RenewalTest, RenewalRacingWithFinishIsNotALoss) {
  Decision d = Begin("k1");
  auto lease = d.claim.lease();
  // Finish completes the record while the renewal's store call is under
  // way: the call then finds no claim to extend.
  FinishResult finish = FinishResult::kInactive;
  bench_.store->BeforeNextExtend([&] {
    finish = d.claim.Finish(Response{201, {}, "order"});
  });
  EXPECT_EQ(lease->Renew(), RenewResult::kEnded);
  EXPECT_EQ(finish, FinishResult::kStored);
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kRenewalLost), 0u);
  EXPECT_EQ(bench_.counter->lost.load() + bench_.counter->renewed.load(), 0);
  EXPECT_FALSE(Logged(LogLevel::kWarning, "lost"));
}

TEST_F(RenewalTest, FinishAbandonAndForgetEndTheLease) {
  for (int how = 0; how < 3; ++how) {
    Decision d = Begin("end-" + std::to_string(how));
    ASSERT_EQ(d.action, Action::kExecute);
    auto lease = d.claim.lease();
    if (how == 0) d.claim.Finish(Response{201, {}, "order"});
    if (how == 1) d.claim.Abandon();
    if (how == 2) d.claim.Forget("test");
    EXPECT_TRUE(lease->ended());
    EXPECT_EQ(lease->Renew(), RenewResult::kEnded);
    EXPECT_EQ(bench_.store->Extends(d.claim.record_id()), 0);
    EXPECT_EQ(d.claim.lease(), nullptr);  // Inactive now.
    EXPECT_EQ(d.claim.lock_renewal(), Duration::zero());
  }
}

TEST_F(RenewalTest, MovedHandleKeepsItsLease) {
  Decision d = Begin("k1");
  auto lease = d.claim.lease();
  ClaimHandle moved = std::move(d.claim);
  EXPECT_FALSE(lease->ended());
  EXPECT_EQ(moved.lease(), lease);
  moved.Finish(Response{201, {}, "order"});
  EXPECT_TRUE(lease->ended());
}

TEST_F(RenewalTest, RunRenewsAHandlerAcrossSeveralLockTimeouts) {
  RunInfo info;
  Response response = Run(
      "slow",
      [&] {
        // 3 s of handler time under a 1 s lock: ten renewals, and a retry
        // after each finds the request in progress, never takes it over.
        for (int i = 1; i <= 10; ++i) {
          RenewTo(i);
          Decision retry = Begin("slow");
          EXPECT_EQ(retry.outcome, Outcome::kConflict) << "after " << i;
        }
        return std::string("order");
      },
      &info);
  EXPECT_EQ(response.status, 201);
  ASSERT_TRUE(info.finish.has_value());
  EXPECT_EQ(*info.finish, FinishResult::kStored);
  EXPECT_GE(bench_.counter->renewed.load(), 10);
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kTakeover), 0u);
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kRenewalLost), 0u);
  EXPECT_EQ(Begin("slow").outcome, Outcome::kReplayed);
  // One renewal thread for the Guard, waiting on its clock.
  EXPECT_EQ(bench_.clock->WaiterCount(), 1u);
}

TEST_F(RenewalTest, CrashedHolderIsTakenOverAfterLockTimeout) {
  // A holder that stopped (crashed: nothing renews its claim) loses the key
  // lock_timeout after the claim, while a renewed one next to it does not.
  Decision crashed = Begin("crashed");
  ASSERT_EQ(crashed.action, Action::kExecute);
  Run("alive", [&] {
    for (int i = 1; i <= 4; ++i) RenewTo(i);  // 1.2 s.
    Decision retry = Begin("crashed");
    EXPECT_EQ(retry.outcome, Outcome::kExecuted);
    EXPECT_TRUE(retry.claim.takeover());
    EXPECT_EQ(Begin("alive").outcome, Outcome::kConflict);
    return std::string("order");
  });
  EXPECT_EQ(bench_.store->Extends(crashed.claim.record_id()), 0);
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kTakeover), 1u);
}

TEST_F(RenewalTest, RenewalOffSchedulesNothing) {
  GuardOptions options = RenewingOptions();
  options.lock_renewal = Duration::zero();
  Rebuild(options);
  RunInfo info;
  Decision held = Begin("held");
  EXPECT_EQ(held.claim.lock_renewal(), Duration::zero());
  EXPECT_EQ(held.claim.lease(), nullptr);  // Nothing to renew.
  held.claim.Abandon();
  Run(
      "slow",
      [&] {
        EXPECT_EQ(bench_.clock->WaiterCount(), 0u);  // No renewal thread.
        bench_.clock->Advance(seconds(2));
        // As without renewal: the slow handler is taken over.
        Decision retry = Begin("slow");
        EXPECT_EQ(retry.outcome, Outcome::kExecuted);
        retry.claim.Finish(Response{201, {}, "other"});
        return std::string("order");
      },
      &info);
  EXPECT_EQ(*info.finish, FinishResult::kStaleComplete);
  EXPECT_EQ(bench_.store->Extends(), 0);
  EXPECT_EQ(bench_.clock->WaiterCount(), 0u);
}

TEST_F(RenewalTest, RunWithALostClaimCountsItAndFinishesStale) {
  RunInfo info;
  Run(
      "slow",
      [&] {
        // The next renewal comes too late: the lock timed out meanwhile
        // and a retry took the key over first.
        bench_.store->BeforeNextExtend([&] {
          bench_.clock->Advance(seconds(1));
          Decision retry = Begin("slow");
          EXPECT_TRUE(retry.claim.takeover());
          retry.claim.Finish(Response{201, {}, "other"});
        });
        bench_.clock->Advance(milliseconds(300));
        EXPECT_TRUE(WaitFor([&] { return bench_.counter->lost.load() == 1; }));
        return std::string("order");
      },
      &info);
  EXPECT_EQ(*info.finish, FinishResult::kStaleComplete);
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kRenewalLost), 1u);
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kStaleComplete), 1u);
}

TEST_F(RenewalTest, ThrowingHandlerStopsRenewing) {
  EXPECT_THROW(Run("throws",
                   [&]() -> std::string {
                     RenewTo(1);
                     throw std::runtime_error("handler failed");
                   }),
               std::runtime_error);
  // The key was released: the next request runs the handler.
  Decision again = Begin("throws");
  ASSERT_EQ(again.action, Action::kExecute);
  const RecordId thrown = again.claim.record_id();
  again.claim.Abandon();
  const int extends = bench_.store->Extends(thrown);
  EXPECT_EQ(extends, 1);
  // Another handler's renewals go on; the thrown one's do not.
  Run("next", [&] {
    for (int i = 2; i <= 4; ++i) RenewTo(i);
    return std::string("order");
  });
  EXPECT_EQ(bench_.store->Extends(thrown), extends);
}

TEST_F(RenewalTest, RunOnceRenewsWhileFnRuns) {
  auto result =
      RunOnce(*bench_.guard, "billing", "msg-1", "charge", "42 EUR", [&] {
        for (int i = 1; i <= 5; ++i) {
          RenewTo(i);
          auto retry = bench_.guard->BeginWithKey("billing", "msg-1", "charge",
                                                  "42 EUR");
          EXPECT_EQ(retry.outcome, Outcome::kConflict);
        }
        return std::string("receipt");
      });
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->storage, OnceStorage::kStored);
  EXPECT_EQ(bench_.guard->metrics().Get(Outcome::kTakeover), 0u);
}

TEST_F(RenewalTest, RenewalThreadStopsWithTheGuard) {
  Run("k1", [&] {
    RenewTo(1);
    return std::string("order");
  });
  EXPECT_EQ(bench_.clock->WaiterCount(), 1u);
  bench_.guard.reset();
  EXPECT_EQ(bench_.clock->WaiterCount(), 0u);
}

}  // namespace
}  // namespace idem
