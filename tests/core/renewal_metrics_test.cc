// Issue 27 #2: lock renewal calls and their failures are alertable series
// (idem_lock_renewals_total, idem_lock_renewal_failures_total), counted in
// ClaimLease::Renew, so the Guard's renewal thread and an adapter's timer
// are both counted.

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "baseline/sharded_mutex_store.h"
#include "idem/claim_lease.h"
#include "idem/guard.h"
#include "support/faulty_store.h"

namespace idem {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RenewalMetricsTest, CallsAndFailuresAreCounted) {
  auto clock = std::make_shared<ManualClock>();
  auto store = std::make_shared<testing::FaultyStore>(
      std::make_shared<bench::ShardedMutexStore>());
  GuardSetup setup;
  setup.store = store;
  setup.clock = clock;
  setup.options.lock_timeout = seconds(1);
  setup.options.lock_renewal = milliseconds(300);
  auto guard = Guard::Create(std::move(setup));
  ASSERT_TRUE(guard.has_value()) << guard.error().ToString();
  Metrics& metrics = (*guard)->metrics();

  Decision d = (*guard)->BeginWithKey("s", "k", "op", "in");
  ASSERT_EQ(d.action, Action::kExecute);
  auto lease = d.claim.lease();
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ(lease->Renew(), RenewResult::kRenewed);
  store->fail_extend = ErrorCode::kUnavailable;
  EXPECT_EQ(lease->Renew(), RenewResult::kStoreFailed);
  store->fail_extend = std::nullopt;
  EXPECT_EQ(lease->Renew(), RenewResult::kRenewed);
  EXPECT_EQ(metrics.Get(CountedEvent::kRenewal), 3u);
  EXPECT_EQ(metrics.Get(CountedEvent::kRenewalFailed), 1u);
  EXPECT_EQ(metrics.Get(Outcome::kRenewalLost), 0u);
  const std::string text = metrics.RenderPrometheus();
  EXPECT_NE(text.find("\nidem_lock_renewals_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("\nidem_lock_renewal_failures_total 1\n"),
            std::string::npos);
  EXPECT_EQ(d.claim.Finish(Response{201, {}, "ok"}), FinishResult::kStored);
  // After the end, Renew makes no call and counts none.
  EXPECT_EQ(lease->Renew(), RenewResult::kEnded);
  EXPECT_EQ(metrics.Get(CountedEvent::kRenewal), 3u);
}

}  // namespace
}  // namespace idem
