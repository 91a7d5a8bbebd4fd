// The epoch reclamation scheme on its own: an object is freed only after
// every thread that might read it has unpinned, objects of exited threads
// are freed, thread registrations are reused, and a guard still works from a
// thread_local destructor at thread exit.

#include "epoch.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace idem::epoch {
namespace {

// Counts its own destruction, so a test can see when the scheme frees it.
struct Probe {
  explicit Probe(std::atomic<int>* freed) : freed(freed) {}
  ~Probe() { freed->fetch_add(1); }
  std::atomic<int>* freed;
};

void RetireProbe(std::atomic<int>& freed) {
  Guard guard;
  Retire(new Probe(&freed));
}

// Several collections in a row: each advances the epoch by at most one.
void CollectAll() {
  for (int i = 0; i < 4; ++i) Collect();
}

// A one-shot signal between two threads (tests only; the scheme itself never
// blocks).
class Latch {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(EpochTest, RetiredObjectWaitsForAPinnedReader) {
  std::atomic<int> freed{0};
  Latch pinned;
  Latch leave;
  std::thread reader([&] {
    Guard guard;
    pinned.Open();
    leave.Wait();
  });
  pinned.Wait();

  RetireProbe(freed);
  CollectAll();
  CollectAll();
  EXPECT_EQ(freed.load(), 0) << "freed while a reader was pinned";

  leave.Open();
  reader.join();
  CollectAll();
  EXPECT_EQ(freed.load(), 1);
}

TEST(EpochTest, UnpinnedObjectsAreFreedByCollection) {
  std::atomic<int> freed{0};
  for (int i = 0; i < 10; ++i) RetireProbe(freed);
  CollectAll();
  EXPECT_EQ(freed.load(), 10);
}

TEST(EpochTest, GuardsNest) {
  std::atomic<int> freed{0};
  {
    Guard outer;
    {
      Guard inner;
      Retire(new Probe(&freed));
    }
    Retire(new Probe(&freed));
  }
  CollectAll();
  EXPECT_EQ(freed.load(), 2);
}

TEST(EpochTest, ObjectsRetiredByAnExitedThreadAreFreed) {
  std::atomic<int> freed{0};
  std::thread t([&] {
    for (int i = 0; i < 5; ++i) RetireProbe(freed);
  });
  t.join();
  CollectAll();
  EXPECT_EQ(freed.load(), 5);
  EXPECT_EQ(GetStats().orphan_batches, 0u);
}

TEST(EpochTest, ThreadRecordsAreReusedAfterExit) {
  {
    Guard guard;  // Register this thread first, so it does not count below.
  }
  std::thread([] { Guard guard; }).join();
  const DomainStats before = GetStats();
  for (int i = 0; i < 50; ++i) {
    std::thread([] { Guard guard; }).join();
  }
  const DomainStats after = GetStats();
  EXPECT_EQ(after.thread_records, before.thread_records);
  EXPECT_EQ(after.thread_records_in_use, before.thread_records_in_use);
}

TEST(EpochTest, ManyThreadsRetireConcurrently) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 5000;
  std::atomic<int> freed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        Guard guard;
        Retire(new Probe(&freed));
      }
    });
  }
  for (auto& t : threads) t.join();
  CollectAll();
  EXPECT_EQ(freed.load(), kThreads * kPerThread);
}

// A thread_local whose destructor uses the scheme after the thread's own
// epoch state was torn down: the guard borrows a record for its duration.
std::atomic<int> late_freed{0};
struct LateUser {
  void Touch() {}
  ~LateUser() { RetireProbe(late_freed); }
};
thread_local LateUser late_user;

TEST(EpochTest, GuardWorksFromAThreadLocalDestructor) {
  late_freed.store(0);
  const DomainStats before = GetStats();
  std::thread([] {
    late_user.Touch();  // Constructed first, so destroyed after the scheme's.
    Guard guard;
  }).join();
  CollectAll();
  EXPECT_EQ(late_freed.load(), 1);
  EXPECT_EQ(GetStats().thread_records_in_use, before.thread_records_in_use);
}

}  // namespace
}  // namespace idem::epoch
