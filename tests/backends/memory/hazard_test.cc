// The hazard-pointer reclamation scheme on its own: an object is freed only
// once no slot protects it (whatever else happens meanwhile), objects of
// exited threads are freed, thread registrations are reused, pointers nest,
// and a pointer still works from a thread_local destructor at thread exit.

#include "memory_hazard.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace idem::hazard {
namespace {

// Counts its own destruction, so a test can see when the scheme frees it.
struct Probe {
  explicit Probe(std::atomic<int>* freed) : freed(freed) {}
  ~Probe() { freed->fetch_add(1); }
  std::atomic<int>* freed;
};

// Unlinks what `link` points to (seq_cst, as memory_hazard.h asks) and retires
// it.
void UnlinkAndRetire(std::atomic<Probe*>& link) {
  Pointer hp;
  Probe* old = link.exchange(nullptr, std::memory_order_seq_cst);
  if (old != nullptr) Retire(old);
}

void RetireProbe(std::atomic<int>& freed) {
  std::atomic<Probe*> link{new Probe(&freed)};
  UnlinkAndRetire(link);
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

// A reader thread that protects what `link` points to and stays inside its
// Pointer, as a thread descheduled in the middle of a store call does, until
// Leave(). Constructed once the protection is in place.
class StalledReader {
 public:
  explicit StalledReader(std::atomic<Probe*>& link)
      : thread_([this, &link] {
          Pointer hp;
          Probe* p = hp.Protect(link);
          protecting_.Open();
          leave_.Wait();
          // Still alive (ASan would report a use after free otherwise).
          if (p != nullptr) alive_ = p->freed != nullptr;
        }) {
    protecting_.Wait();
  }
  ~StalledReader() { Leave(); }

  // Lets the reader drop its protection and exit; returns whether what it
  // protected was still intact when it left.
  bool Leave() {
    if (thread_.joinable()) {
      leave_.Open();
      thread_.join();
    }
    return alive_;
  }

 private:
  Latch protecting_;
  Latch leave_;
  bool alive_ = true;
  std::thread thread_;  // Last: starts once the members above exist.
};

TEST(HazardTest, ProtectedObjectWaitsForItsReader) {
  std::atomic<int> freed{0};
  std::atomic<Probe*> link{new Probe(&freed)};
  StalledReader reader(link);

  UnlinkAndRetire(link);
  Collect();
  Collect();
  EXPECT_EQ(freed.load(), 0) << "freed while a reader protected it";

  EXPECT_TRUE(reader.Leave());
  Collect();
  EXPECT_EQ(freed.load(), 1);
}

// The point of hazard pointers over epochs: a reader that stays inside a
// call holds back only what it protects, not everything retired meanwhile.
TEST(HazardTest, AStalledReaderHoldsBackOnlyWhatItProtects) {
  std::atomic<int> freed{0};
  std::atomic<Probe*> link{new Probe(&freed)};
  StalledReader reader(link);

  for (int i = 0; i < 1000; ++i) RetireProbe(freed);
  Collect();
  EXPECT_EQ(freed.load(), 1000);

  UnlinkAndRetire(link);
  Collect();
  EXPECT_EQ(freed.load(), 1000);
  EXPECT_TRUE(reader.Leave());
  Collect();
  EXPECT_EQ(freed.load(), 1001);
}

TEST(HazardTest, ProtectFollowsALinkThatChanges) {
  std::atomic<int> freed{0};
  std::atomic<Probe*> link{new Probe(&freed)};
  {
    Pointer hp;
    Probe* first = hp.Protect(link);
    Probe* second = new Probe(&freed);
    link.store(second, std::memory_order_seq_cst);
    EXPECT_EQ(hp.Protect(link), second);
    // The slot moved on from `first` to `second`: both retired, a scan
    // frees `first` only.
    Retire(first);
    Retire(link.exchange(nullptr, std::memory_order_seq_cst));
    Collect();
    EXPECT_EQ(freed.load(), 1);
    // Protecting null (nothing to protect) and Reset release `second`.
    std::atomic<Probe*> empty{nullptr};
    EXPECT_EQ(hp.Protect(empty), nullptr);
    hp.Reset();
    Collect();
    EXPECT_EQ(freed.load(), 2);
  }
}

TEST(HazardTest, UnprotectedObjectsAreFreedByCollection) {
  std::atomic<int> freed{0};
  for (int i = 0; i < 10; ++i) RetireProbe(freed);
  Collect();
  EXPECT_EQ(freed.load(), 10);
}

TEST(HazardTest, PointersNest) {
  std::atomic<int> freed{0};
  std::atomic<Probe*> a{new Probe(&freed)};
  std::atomic<Probe*> b{new Probe(&freed)};
  {
    Pointer outer;
    Probe* pa = outer.Protect(a);
    {
      Pointer inner;
      inner.Protect(b);
      Retire(a.exchange(nullptr, std::memory_order_seq_cst));
    }
    // `a` was unlinked while `outer` protected it: still alive.
    Collect();
    EXPECT_EQ(freed.load(), 0);
    EXPECT_EQ(pa->freed, &freed);
  }
  UnlinkAndRetire(b);
  Collect();
  EXPECT_EQ(freed.load(), 2);
}

TEST(HazardTest, ObjectsRetiredByAnExitedThreadAreFreed) {
  std::atomic<int> freed{0};
  std::atomic<Probe*> link{new Probe(&freed)};
  // A reader protects the object while its retirer exits: the retirer
  // leaves it as an orphan, which a later scan frees once unprotected.
  StalledReader reader(link);
  std::thread retirer([&] {
    UnlinkAndRetire(link);
    for (int i = 0; i < 5; ++i) RetireProbe(freed);
  });
  retirer.join();
  EXPECT_EQ(freed.load(), 5);
  EXPECT_EQ(GetStats().orphans, 1u);
  EXPECT_TRUE(reader.Leave());
  Collect();
  EXPECT_EQ(freed.load(), 6);
  EXPECT_EQ(GetStats().orphans, 0u);
}

TEST(HazardTest, ThreadRecordsAreReusedAfterExit) {
  {
    Pointer hp;  // Register this thread first, so it does not count below.
  }
  std::thread([] { Pointer hp; }).join();
  const DomainStats before = GetStats();
  for (int i = 0; i < 50; ++i) {
    std::thread([] { Pointer hp; }).join();
  }
  const DomainStats after = GetStats();
  EXPECT_EQ(after.thread_records, before.thread_records);
  EXPECT_EQ(after.thread_records_in_use, before.thread_records_in_use);
}

// Readers and writers on a few shared links: every reader dereferences what
// it protected while writers replace and retire the objects. Under ASan or
// TSan a premature free is reported; the count checks nothing leaks.
TEST(HazardTest, ManyThreadsReadAndRetireConcurrently) {
  constexpr int kThreads = 8;
  constexpr int kLinks = 4;
  constexpr int kPerThread = 5000;
  std::atomic<int> freed{0};
  std::atomic<int> created{0};
  std::atomic<Probe*> links[kLinks];
  for (auto& l : links) {
    l.store(new Probe(&freed));
    created.fetch_add(1);
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::atomic<Probe*>& link = links[(t + i) % kLinks];
        Pointer hp;
        Probe* p = hp.Protect(link);
        if (p != nullptr && p->freed != &freed) bad.fetch_add(1);
        if ((t + i) % 2 == 0) {
          auto* fresh = new Probe(&freed);
          created.fetch_add(1);
          Probe* old = link.exchange(fresh, std::memory_order_seq_cst);
          if (old != nullptr) Retire(old);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& l : links) UnlinkAndRetire(l);
  Collect();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(freed.load(), created.load());
}

// A thread_local whose destructor uses the scheme after the thread's own
// hazard state was torn down: the pointer borrows a record for its duration.
std::atomic<int> late_freed{0};
struct LateUser {
  void Touch() {}
  ~LateUser() { RetireProbe(late_freed); }
};
thread_local LateUser late_user;

TEST(HazardTest, PointerWorksFromAThreadLocalDestructor) {
  late_freed.store(0);
  const DomainStats before = GetStats();
  std::thread([] {
    late_user.Touch();  // Constructed first, so destroyed after the scheme's.
    Pointer hp;
  }).join();
  Collect();
  EXPECT_EQ(late_freed.load(), 1);
  EXPECT_EQ(GetStats().thread_records_in_use, before.thread_records_in_use);
}

}  // namespace
}  // namespace idem::hazard
