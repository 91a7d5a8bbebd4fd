// StoreThread (idem/store/store_thread.h): every posted call runs exactly
// once, on one thread other than the poster's, in the order each poster
// posted them, and Join (or the destructor) returns only after every call
// posted before it ran; an after_batch hook follows every batch.

#include "idem/store/store_thread.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace idem {
namespace {

TEST(StoreThreadTest, EveryCallRunsOnceInItsPostersOrderBeforeJoinReturns) {
  constexpr int kPosters = 8;
  constexpr int kCalls = 1000;
  std::vector<int> last(kPosters, -1);  // Touched by the store thread only.
  std::atomic<int> out_of_order{0};
  std::atomic<int> ran{0};
  std::set<std::thread::id> runners;  // Store thread only.
  std::vector<std::thread::id> posters(kPosters);
  StoreThread thread;
  std::vector<std::thread> threads;
  for (int p = 0; p < kPosters; ++p) {
    threads.emplace_back([&, p] {
      posters[p] = std::this_thread::get_id();
      for (int i = 0; i < kCalls; ++i) {
        thread.Post([&, p, i] {
          if (last[p] != i - 1) out_of_order.fetch_add(1);
          last[p] = i;
          runners.insert(std::this_thread::get_id());
          ran.fetch_add(1);
        });
      }
    });
  }
  for (std::thread& t : threads) t.join();
  thread.Join();
  EXPECT_EQ(ran.load(), kPosters * kCalls);
  EXPECT_EQ(out_of_order.load(), 0);
  ASSERT_EQ(runners.size(), 1u);
  for (const std::thread::id& poster : posters) {
    EXPECT_NE(*runners.begin(), poster);
  }
}

TEST(StoreThreadTest, TheDestructorRunsWhatWasPosted) {
  std::atomic<int> ran{0};
  {
    StoreThread thread;
    for (int i = 0; i < 100; ++i) thread.Post([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 100);
  StoreThread unused;  // Never posted to: no thread to join.
}

// after_batch runs on the store thread after every call it ran before it,
// and never with a call left unfollowed by it: the last thing the thread
// does before Join returns is after_batch.
TEST(StoreThreadTest, AfterBatchFollowsEveryBatchOnTheThread) {
  constexpr int kPosters = 4;
  constexpr int kCalls = 500;
  int unflushed = 0;  // Calls since the last after_batch: store thread only.
  int flushed = 0;
  int batches = 0;
  std::thread::id call_thread;
  std::atomic<int> elsewhere{0};
  {
    StoreThread thread([&] {
      if (std::this_thread::get_id() != call_thread) elsewhere.fetch_add(1);
      flushed += unflushed;
      unflushed = 0;
      ++batches;
    });
    std::vector<std::thread> threads;
    for (int p = 0; p < kPosters; ++p) {
      threads.emplace_back([&] {
        for (int i = 0; i < kCalls; ++i) {
          thread.Post([&] {
            call_thread = std::this_thread::get_id();
            ++unflushed;
          });
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  EXPECT_EQ(unflushed, 0);
  EXPECT_EQ(flushed, kPosters * kCalls);
  EXPECT_GE(batches, 1);
  EXPECT_LE(batches, kPosters * kCalls);
  EXPECT_EQ(elsewhere.load(), 0);
}

}  // namespace
}  // namespace idem
