// The store contract under concurrency: racing claims, takeovers and
// completions of one id; see store_contract.h. Threads start on a
// std::barrier so that the calls under test really overlap; every loop is
// bounded.

#include <barrier>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "idem/token.h"
#include "idem/types.h"
#include "store_contract_util.h"

namespace idem::testing {

int contract::ConcurrencyContractAnchor() { return 0; }

namespace {

using contract::Describe;
using contract::ExpectSameResponse;
using contract::kLock;
using contract::kTtl;
using contract::Ns;
using contract::RichResponse;
using contract::StressRounds;
using contract::TestFp;
using contract::TestId;
using std::chrono::seconds;

// What one thread saw. Threads record it; the checks run after join so a
// failure names the round and thread instead of racing gtest output.
struct Observed {
  bool ok = false;
  std::string error;
  ClaimResult claim;
};

}  // namespace

TEST_P(StoreContractTest, ConcurrentClaimsOnAnAbsentIdAcquireExactlyOnce) {
  constexpr int kThreads = 32;
  constexpr int kRounds = StressRounds(200);
  const TimePoint t0 = Now();
  std::vector<Observed> seen(kThreads * kRounds);
  // One thread set for all rounds; the barrier releases all 32 claims of a
  // round together, which is what makes them race.
  std::barrier<> start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        start.arrive_and_wait();
        // Half the threads send another request under the same key.
        auto claim =
            store().Claim(TestId(1000 + round), TestFp(t % 2), t0, kTtl, kLock);
        Observed& out = seen[round * kThreads + t];
        out.ok = claim.has_value();
        if (out.ok) {
          out.claim = std::move(*claim);
        } else {
          out.error = claim.error().ToString();
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();

  for (int round = 0; round < kRounds; ++round) {
    int winner = -1;
    int acquired = 0;
    for (int t = 0; t < kThreads; ++t) {
      const Observed& o = seen[round * kThreads + t];
      ASSERT_TRUE(o.ok) << "round " << round << " thread " << t << ": "
                        << o.error;
      if (o.claim.outcome == ClaimOutcome::kAcquired) {
        ++acquired;
        winner = t;
      }
    }
    ASSERT_EQ(acquired, 1) << "round " << round;
    const ClaimResult& win = seen[round * kThreads + winner].claim;
    EXPECT_FALSE(win.takeover);
    for (int t = 0; t < kThreads; ++t) {
      if (t == winner) continue;
      const ClaimResult& lose = seen[round * kThreads + t].claim;
      if (t % 2 == winner % 2) {
        EXPECT_EQ(lose.outcome, ClaimOutcome::kInProgress)
            << "round " << round << " thread " << t << ": " << Describe(lose);
        EXPECT_EQ(Ns(lose.locked_until), Ns(win.locked_until));
      } else {
        EXPECT_EQ(lose.outcome, ClaimOutcome::kMismatch)
            << "round " << round << " thread " << t << ": " << Describe(lose);
      }
    }
    ASSERT_OK_AND_ASSIGN(auto record,
                         store().Inspect(TestId(1000 + round), t0));
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->token, win.token) << "round " << round;
    EXPECT_EQ(record->fingerprint, TestFp(winner % 2));
  }
}

TEST_P(StoreContractTest, ConcurrentTakeoverOfATimedOutLockHappensOnce) {
  constexpr int kThreads = 16;
  constexpr int kRounds = StressRounds(50);
  const TimePoint t0 = Now();
  const TimePoint t1 = t0 + kLock + seconds(1);
  std::vector<Token> original(kRounds);
  for (int round = 0; round < kRounds; ++round) {
    IDEM_CONTRACT_ACQUIRE(claim, TestId(round), TestFp(1), t0);
    original[round] = claim.token;
  }

  std::vector<Observed> seen(kThreads * kRounds);
  std::barrier<> start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        start.arrive_and_wait();
        auto claim = store().Claim(TestId(round), TestFp(1), t1, kTtl, kLock);
        Observed& out = seen[round * kThreads + t];
        out.ok = claim.has_value();
        if (out.ok) {
          out.claim = std::move(*claim);
        } else {
          out.error = claim.error().ToString();
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();

  for (int round = 0; round < kRounds; ++round) {
    int acquired = 0;
    const ClaimResult* win = nullptr;
    for (int t = 0; t < kThreads; ++t) {
      const Observed& o = seen[round * kThreads + t];
      ASSERT_TRUE(o.ok) << "round " << round << ": " << o.error;
      if (o.claim.outcome == ClaimOutcome::kAcquired) {
        ++acquired;
        win = &o.claim;
      }
    }
    ASSERT_EQ(acquired, 1) << "round " << round;
    EXPECT_TRUE(win->takeover);
    EXPECT_EQ(Ns(win->locked_until), Ns(t1 + kLock));
    for (int t = 0; t < kThreads; ++t) {
      const ClaimResult& c = seen[round * kThreads + t].claim;
      if (&c == win) continue;
      EXPECT_EQ(c.outcome, ClaimOutcome::kInProgress) << Describe(c);
      EXPECT_EQ(Ns(c.locked_until), Ns(t1 + kLock));
    }
    ASSERT_OK_AND_ASSIGN(
        bool stale,
        store().Complete(TestId(round), original[round], RichResponse()));
    EXPECT_FALSE(stale) << "round " << round;
  }
}

TEST_P(StoreContractTest, ConcurrentCompleteAndReleaseOfOneTokenSucceedOnce) {
  constexpr int kThreads = 8;
  constexpr int kRounds = StressRounds(100);
  const TimePoint t0 = Now();
  std::vector<Token> tokens(kRounds);
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_OK_AND_ASSIGN(
        ClaimResult claim,
        store().Claim(TestId(round), TestFp(1), t0, kTtl, kLock));
    tokens[round] = claim.token;
  }
  auto response_of = [](int thread) {
    return Response{.status = 200 + thread,
                    .headers = {},
                    .body = "thread " + std::to_string(thread)};
  };

  // 1: the call returned true, 0: false, -1: error.
  std::vector<int> won(kThreads * kRounds, -1);
  std::barrier<> start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Response response = response_of(t);
      for (int round = 0; round < kRounds; ++round) {
        start.arrive_and_wait();
        // Even threads complete, odd threads release, all with one token.
        auto done = t % 2 == 0 ? store().Complete(TestId(round), tokens[round],
                                                  response)
                               : store().Release(TestId(round), tokens[round]);
        if (done.has_value()) won[round * kThreads + t] = *done ? 1 : 0;
      }
    });
  }
  for (auto& thread : threads) thread.join();

  for (int round = 0; round < kRounds; ++round) {
    int winner = -1;
    int wins = 0;
    for (int t = 0; t < kThreads; ++t) {
      const int w = won[round * kThreads + t];
      ASSERT_NE(w, -1) << "round " << round << " thread " << t << " failed";
      if (w == 1) {
        ++wins;
        winner = t;
      }
    }
    ASSERT_EQ(wins, 1) << "round " << round;
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(round), t0));
    if (winner % 2 == 0) {
      ASSERT_TRUE(record.has_value()) << "round " << round;
      EXPECT_EQ(record->state, RecordState::kCompleted);
      ExpectSameResponse(record->response, response_of(winner));
    } else {
      EXPECT_FALSE(record.has_value()) << "round " << round;
    }
  }
}

}  // namespace idem::testing
