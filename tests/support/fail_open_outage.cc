#include "support/fail_open_outage.h"

#include <chrono>

#include <gtest/gtest.h>

#include "idem/metrics.h"

namespace idem::testing {

void ExpectFailOpenOutage(FailOpenGuard& open, GuardClient& client,
                          Duration call_bound,
                          const std::function<void()>& stop_server,
                          const std::function<void()>& restart_server) {
  const Duration backoff = open.guard->options().store_backoff;
  EXPECT_EQ(client.Send("before").status, 201);
  EXPECT_EQ(open.counting->claims.load(), 1);

  stop_server();
  if (::testing::Test::HasFatalFailure()) return;
  // The failed claim: the handler runs unprotected.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(client.Send("k1").status, 201);
  EXPECT_LT(std::chrono::steady_clock::now() - start, call_bound);
  EXPECT_EQ(open.counting->claims.load(), 2);
  EXPECT_EQ(client.runs, 2);
  // Within the backoff the store is not asked at all, even for a key it
  // holds: the request runs unprotected.
  open.clock->Advance(backoff - std::chrono::seconds(1));
  EXPECT_EQ(client.Send("before").status, 201);
  EXPECT_EQ(open.counting->claims.load(), 2);
  EXPECT_EQ(client.runs, 3);
  EXPECT_EQ(open.guard->metrics().Get(Outcome::kFailOpen), 2u);

  restart_server();
  if (::testing::Test::HasFatalFailure()) return;
  // After the backoff, requests are protected again by the same store.
  open.clock->Advance(std::chrono::seconds(1));
  EXPECT_EQ(client.Send("after").status, 201);
  EXPECT_EQ(open.counting->claims.load(), 3);
  EXPECT_EQ(client.Send("after").FindHeader("Idempotent-Replayed"), "true");
  EXPECT_EQ(client.runs, 4);
}

}  // namespace idem::testing
