// Lock renewal through a store outage (GuardOptions::lock_renewal_retry,
// ClaimHandle::lock_state): what the handler is told, how soon a failed
// renewal is tried again, and the window in which a retry that arrives right
// after the store returns can still take the key over, measured over many
// thaw-and-retry trials on a ManualClock.

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "idem/claim_lease.h"
#include "idem/guard.h"
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

// The finding's setting: --lock-timeout 1 --lock-renewal 0.3.
GuardOptions OutageOptions(Duration retry) {
  GuardOptions options;
  options.lock_timeout = seconds(1);
  options.lock_renewal = milliseconds(300);
  options.lock_renewal_retry = retry;
  return options;
}

// A RenewalBench with `options`, anonymous requests, no log.
struct OutageBench : testing::RenewalBench {
  explicit OutageBench(GuardOptions options) {
    Status built = Rebuild(std::move(options));
    EXPECT_TRUE(built.has_value()) << built.error().ToString();
  }
};

TEST(RenewalOutageOptionsTest, ValidateNamesLockRenewalRetry) {
  GuardOptions options = OutageOptions(milliseconds(50));
  EXPECT_TRUE(options.Validate().has_value());
  EXPECT_EQ(GuardOptions().lock_renewal_retry, milliseconds(50));  // Default.
  // Above lock_renewal is allowed: lock_renewal is used then.
  options.lock_renewal_retry = seconds(5);
  EXPECT_TRUE(options.Validate().has_value());
  for (Duration bad : {Duration::zero(), Duration(milliseconds(-1)),
                       Duration(std::chrono::hours(2))}) {
    options.lock_renewal_retry = bad;
    auto valid = options.Validate();
    ASSERT_FALSE(valid.has_value());
    EXPECT_EQ(valid.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(valid.error().message().find("lock_renewal_retry"),
              std::string::npos)
        << valid.error().message();
    EXPECT_FALSE(Guard::MakeRouteOptions(options).has_value());
  }
}

TEST(RenewalOutageTest, LeaseRetriesAFailedRenewalAfterRetryInterval) {
  OutageBench s(OutageOptions(milliseconds(50)));
  Decision d = s.Begin("k");
  auto lease = d.claim.lease();
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ(lease->retry_interval(), milliseconds(50));
  EXPECT_EQ(lease->DelayAfter(RenewResult::kStoreFailed), milliseconds(50));
  EXPECT_EQ(lease->DelayAfter(RenewResult::kRenewed), milliseconds(300));
  // A retry setting above the renewal interval is capped to it.
  OutageBench capped(OutageOptions(seconds(5)));
  Decision c = capped.Begin("k");
  EXPECT_EQ(c.claim.lease()->retry_interval(), milliseconds(300));
}

TEST(RenewalOutageTest, LockStateWithoutRenewalFollowsTheLockTimeout) {
  GuardOptions options = OutageOptions(milliseconds(50));
  options.lock_renewal = Duration::zero();
  OutageBench s(options);
  Decision d = s.Begin("k");
  ASSERT_EQ(d.action, Action::kExecute);
  EXPECT_EQ(d.claim.lock_state(), LockState::kHeld);
  EXPECT_FALSE(d.claim.LockMayBeLost());
  s.clock->Advance(milliseconds(999));
  EXPECT_EQ(d.claim.lock_state(), LockState::kHeld);
  s.clock->Advance(milliseconds(1));
  EXPECT_EQ(d.claim.lock_state(), LockState::kMayBeLost);
  EXPECT_TRUE(d.claim.LockMayBeLost());
  d.claim.Finish(Response{201, {}, "order"});
  EXPECT_EQ(d.claim.lock_state(), LockState::kEnded);
  EXPECT_TRUE(d.claim.LockMayBeLost());
}

TEST(RenewalOutageTest, LockStateTracksRenewals) {
  OutageBench s(OutageOptions(milliseconds(50)));
  Decision d = s.Begin("k");
  auto lease = d.claim.lease();
  EXPECT_EQ(d.claim.lock_state(), LockState::kHeld);
  // A failed renewal: may be lost at once, though the lock has 0.7 s left.
  s.clock->Advance(milliseconds(300));
  s.store->fail_extend = true;
  EXPECT_EQ(lease->Renew(), RenewResult::kStoreFailed);
  EXPECT_EQ(d.claim.lock_state(), LockState::kMayBeLost);
  // The store answers again: held until now + lock_timeout.
  s.store->fail_extend = false;
  s.clock->Advance(milliseconds(50));
  EXPECT_EQ(lease->Renew(), RenewResult::kRenewed);
  EXPECT_EQ(d.claim.lock_state(), LockState::kHeld);
  // No renewal for a whole lock_timeout (a paused process): may be lost.
  s.clock->Advance(seconds(1));
  EXPECT_EQ(d.claim.lock_state(), LockState::kMayBeLost);
  // Nobody took it over: the renewal holds it again.
  EXPECT_EQ(lease->Renew(), RenewResult::kRenewed);
  EXPECT_EQ(d.claim.lock_state(), LockState::kHeld);
  // Taken over: the next renewal knows.
  s.clock->Advance(seconds(2));
  Decision other = s.Begin("k");
  ASSERT_TRUE(other.claim.takeover());
  EXPECT_EQ(d.claim.lock_state(), LockState::kMayBeLost);
  EXPECT_EQ(lease->Renew(), RenewResult::kLost);
  EXPECT_EQ(d.claim.lock_state(), LockState::kLost);
  EXPECT_EQ(other.claim.lock_state(), LockState::kHeld);
}

// The Guard's renewal thread (Guard::Run) retries after lock_renewal_retry,
// not after lock_renewal, and the handler sees the lock may be lost.
TEST(RenewalOutageTest, RunRetriesAFailedRenewalSoon) {
  OutageBench s(OutageOptions(milliseconds(50)));
  const HeaderView header[] = {{"Idempotency-Key", "slow"}};
  RequestView request;
  request.method = "POST";
  request.target = "/orders";
  request.headers = std::span<const HeaderView>(header, 1);
  RunInfo info;
  s.guard->Run(
      request,
      [&](ClaimHandle& claim) {
        s.store->fail_extend = true;
        s.clock->Advance(milliseconds(300));
        EXPECT_TRUE(WaitFor([&] { return s.counter->store_failed >= 1; }));
        EXPECT_TRUE(claim.LockMayBeLost());
        // Three retries in 150 ms of the clock, where a whole lock_renewal
        // (300 ms) passed before the next renewal until now.
        for (int i = 2; i <= 4; ++i) {
          s.clock->Advance(milliseconds(50));
          EXPECT_TRUE(WaitFor([&] { return s.counter->store_failed >= i; },
                              seconds(20)))
              << "retry " << i << " never came";
        }
        s.store->fail_extend = false;
        s.clock->Advance(milliseconds(50));
        EXPECT_TRUE(WaitFor([&] { return s.counter->renewed >= 1; }));
        EXPECT_EQ(claim.lock_state(), LockState::kHeld);
        // Then back to one renewal per lock_renewal.
        const int calls = s.store->Extends();
        s.clock->Advance(milliseconds(300));
        EXPECT_TRUE(WaitFor([&] { return s.counter->renewed >= 2; }));
        EXPECT_EQ(s.store->Extends(), calls + 1);
        return Response{201, {}, "order"};
      },
      nullptr, &info);
  ASSERT_TRUE(info.finish.has_value());
  EXPECT_EQ(*info.finish, FinishResult::kStored);
}

// One thaw-and-retry trial, as the renewal thread schedules it (DelayAfter
// from each renewal's start), single-threaded on the ManualClock so that
// every trial is exact: the store fails every call from freeze_at to
// thaw_at after the claim, and a retry of the same key arrives `delay`
// after the thaw. Returns whether the retry took the key over; checks what
// the holder's lock_state said.
bool TakenOverAfterThaw(OutageBench& s, const std::string& key,
                        Duration freeze_at, Duration thaw_at, Duration delay) {
  Decision d = s.Begin(key);
  EXPECT_EQ(d.action, Action::kExecute);
  const TimePoint start = s.clock->Now();
  auto lease = d.claim.lease();
  TimePoint due = start + lease->interval();
  const TimePoint retry_at = start + thaw_at + delay;
  // Renewals first when they are due at the retry's instant (a tie).
  while (due <= retry_at) {
    s.clock->Set(due);
    const Duration t = due - start;
    s.store->fail_extend = t >= freeze_at && t < thaw_at;
    const RenewResult result = lease->Renew();
    EXPECT_NE(result, RenewResult::kLost);
    due += lease->DelayAfter(result);
  }
  s.store->fail_extend = false;
  s.clock->Set(retry_at);
  const LockState before = d.claim.lock_state();
  Decision retry = s.Begin(key);
  const bool taken = retry.action == Action::kExecute;
  if (taken) {
    // The holder had been told, and its next renewal knows it lost.
    EXPECT_EQ(before, LockState::kMayBeLost) << key;
    EXPECT_EQ(lease->Renew(), RenewResult::kLost);
    EXPECT_EQ(d.claim.lock_state(), LockState::kLost);
    retry.claim.Finish(Response{201, {}, "retry"});
    EXPECT_EQ(d.claim.Finish(Response{201, {}, "late"}),
              FinishResult::kStaleComplete);
  } else {
    EXPECT_EQ(retry.outcome, Outcome::kConflict) << key;
    EXPECT_EQ(before, LockState::kHeld) << key;
    EXPECT_EQ(d.claim.Finish(Response{201, {}, "order"}),
              FinishResult::kStored);
  }
  return taken;
}

struct Window {
  int trials = 0;
  int takeovers = 0;
  Duration widest{};  // The longest delay after the thaw that took over.
};

// The finding's outage: frozen from 0.5 s to 8.5 s (plus a phase, so the
// thaw falls anywhere between two renewals), a retry 0..295 ms after it.
Window MeasureWindow(Duration retry) {
  OutageBench s(OutageOptions(retry));
  Window w;
  for (int phase = 0; phase < 300; phase += 15) {
    for (int delay = 0; delay < 300; delay += 5) {
      const std::string key =
          "t" + std::to_string(phase) + "-" + std::to_string(delay);
      const bool taken =
          TakenOverAfterThaw(s, key, milliseconds(500),
                             milliseconds(8500 + phase), milliseconds(delay));
      ++w.trials;
      if (taken) {
        ++w.takeovers;
        w.widest = std::max(w.widest, Duration(milliseconds(delay)));
      }
    }
  }
  return w;
}

std::string Describe(const Window& w) {
  return std::to_string(w.takeovers) + " of " + std::to_string(w.trials) +
         " retries took over, the latest " +
         std::to_string(
             std::chrono::duration_cast<milliseconds>(w.widest).count()) +
         " ms after the thaw";
}

// The figure docs/GUIDE.md quotes ("Lock renewal for slow handlers"), from
//   build/main/tests/core/idem_core_tests
//   --gtest_filter='RenewalOutageTest.WindowAfterThaw*'
TEST(RenewalOutageTest, WindowAfterThawIsAtMostTheRetryInterval) {
  const Window with_retry = MeasureWindow(milliseconds(50));
  // Retrying only at the next lock_renewal, as before lock_renewal_retry.
  const Window without = MeasureWindow(milliseconds(300));
  std::printf("lock_renewal_retry 50 ms: %s\n", Describe(with_retry).c_str());
  std::printf("retry at lock_renewal (300 ms): %s\n",
              Describe(without).c_str());
  ::testing::Test::RecordProperty("with_retry", Describe(with_retry));
  ::testing::Test::RecordProperty("without_retry", Describe(without));
  // A retry can only win before the holder's first renewal after the thaw,
  // which comes within lock_renewal_retry.
  EXPECT_LT(with_retry.widest, milliseconds(50));
  EXPECT_GT(with_retry.takeovers, 0);  // The window is not closed: it exists.
  EXPECT_LT(with_retry.takeovers * 5, with_retry.trials);
  // Waiting a whole lock_renewal leaves a retry about six times as long.
  EXPECT_GE(without.widest, milliseconds(200));
  EXPECT_GT(without.takeovers, 4 * with_retry.takeovers);
}

}  // namespace
}  // namespace idem
