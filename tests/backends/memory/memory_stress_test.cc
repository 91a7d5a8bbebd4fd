// Concurrency tests of the memory store: many threads on few ids, a full
// store with expiring records, and threads that come and go. Their main
// value is under ASan and TSan (use-after-free or a race in the lock-free
// paths or in hazard-pointer reclamation); the asserted invariants catch lost
// updates. Loops are bounded so each test stays well under a second or two
// in a debug build.

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "idem/memory_store.h"
#include "memory_hazard.h"
#include "memory_test_util.h"

namespace idem {
namespace {

using memory_test::kT0;
using std::chrono::hours;
using std::chrono::seconds;
using testing::SplitMix64;
using testing::TestFingerprint;
using testing::TestId;

constexpr int kThreads = 16;

std::unique_ptr<MemoryStore> OpenStore(std::size_t capacity) {
  auto store = MemoryStore::Open(MemoryStoreOptions{.capacity = capacity});
  EXPECT_TRUE(store.has_value());
  return std::move(*store);
}

template <typename Fn>
void RunThreads(int n, Fn fn) {
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int t = 0; t < n; ++t) threads.emplace_back(fn, t);
  for (auto& th : threads) th.join();
}

TEST(MemoryStoreStressTest, ClaimAndReleaseAreExclusivePerId) {
  constexpr int kIds = 4;
  constexpr int kIterations = 1500;
  auto store = OpenStore(64);
  std::array<std::atomic<int>, kIds> holders{};
  std::atomic<int> acquired{0};
  std::atomic<int> violations{0};

  RunThreads(kThreads, [&](int t) {
    std::uint64_t rng = t;
    for (int i = 0; i < kIterations; ++i) {
      const int k = static_cast<int>(SplitMix64(rng) % kIds);
      // Fixed time and a long lock: no takeover, so a holder is exclusive.
      auto r =
          store->Claim(TestId(k), TestFingerprint(k), kT0, hours(1), hours(1));
      if (!r || (r->outcome != ClaimOutcome::kAcquired &&
                 r->outcome != ClaimOutcome::kInProgress)) {
        violations.fetch_add(1);
        continue;
      }
      if (r->outcome != ClaimOutcome::kAcquired) {
        if (SplitMix64(rng) % 4 == 0) (void)store->Inspect(TestId(k), kT0);
        continue;
      }
      acquired.fetch_add(1);
      if (holders[k].fetch_add(1) != 0) violations.fetch_add(1);
      auto rec = store->Inspect(TestId(k), kT0);
      if (!rec || !rec->has_value() || (*rec)->token != r->token) {
        violations.fetch_add(1);
      }
      Token wrong = r->token;
      wrong.bytes[0] ^= 1;
      if (store->Complete(TestId(k), wrong, Response{}).value_or(true) ||
          store->Release(TestId(k), wrong).value_or(true)) {
        violations.fetch_add(1);
      }
      holders[k].fetch_sub(1);
      if (!store->Release(TestId(k), r->token).value_or(false)) {
        violations.fetch_add(1);
      }
      // The token is spent: a second release must fail.
      if (store->Release(TestId(k), r->token).value_or(true)) {
        violations.fetch_add(1);
      }
    }
  });

  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(acquired.load(), kIds);
  EXPECT_EQ(store->size(), 0u);
}

TEST(MemoryStoreStressTest, EachIdIsCompletedExactlyOnce) {
  constexpr int kIds = 64;
  // Room for every id plus one in-flight reservation per thread: a claim
  // that races to insert may hold a slot for an instant, and near capacity
  // that can make another claim see the store full (documented).
  auto store = OpenStore(kIds + kThreads);
  std::array<std::atomic<int>, kIds> completions{};
  std::atomic<int> violations{0};

  RunThreads(kThreads, [&](int t) {
    std::uint64_t rng = t + 1000;
    for (int round = 0; round < 4; ++round) {
      for (int j = 0; j < kIds; ++j) {
        const int k = static_cast<int>((j + SplitMix64(rng)) % kIds);
        auto r = store->Claim(TestId(k), TestFingerprint(k), kT0, hours(1),
                              hours(1));
        if (!r) {
          violations.fetch_add(1);
          continue;
        }
        switch (r->outcome) {
          case ClaimOutcome::kAcquired: {
            Response response{201,
                              {{"Content-Type", "text/plain"}},
                              "order " + std::to_string(k)};
            if (store->Complete(TestId(k), r->token, response)
                    .value_or(false)) {
              completions[k].fetch_add(1);
            } else {
              violations.fetch_add(1);
            }
            break;
          }
          case ClaimOutcome::kCompleted:
            if (r->response == nullptr ||
                r->response->body != "order " + std::to_string(k)) {
              violations.fetch_add(1);
            }
            break;
          case ClaimOutcome::kInProgress:
            break;
          case ClaimOutcome::kMismatch:
            violations.fetch_add(1);
            break;
        }
      }
    }
  });

  EXPECT_EQ(violations.load(), 0);
  for (int k = 0; k < kIds; ++k) {
    EXPECT_EQ(completions[k].load(), 1) << "id " << k;
    auto r =
        store->Claim(TestId(k), TestFingerprint(k), kT0, hours(1), hours(1));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->outcome, ClaimOutcome::kCompleted);
  }
  EXPECT_EQ(store->size(), static_cast<std::size_t>(kIds));
}

// Small capacity, many ids, time moving per thread: exercises expiry,
// takeover, reuse of expired records, reclaim sweeps racing each other and
// PurgeExpired, all at once.
TEST(MemoryStoreStressTest, FullStoreWithExpiringRecords) {
  constexpr std::size_t kCapacity = 8;
  constexpr int kIds = 48;
  constexpr int kIterations = 1200;
  auto store = OpenStore(kCapacity);
  std::atomic<int> violations{0};
  std::atomic<int> acquired{0};
  std::atomic<int> full{0};
  std::atomic<std::size_t> max_size{0};

  RunThreads(kThreads, [&](int t) {
    std::uint64_t rng = t + 2000;
    for (int i = 0; i < kIterations; ++i) {
      const TimePoint now = kT0 + std::chrono::milliseconds(10 * i);
      const int k = static_cast<int>(SplitMix64(rng) % kIds);
      const int fp = SplitMix64(rng) % 8 == 0 ? k + 1 : k;
      auto r = store->Claim(TestId(k), TestFingerprint(fp), now,
                            std::chrono::milliseconds(200),
                            std::chrono::milliseconds(50));
      const std::size_t size = store->size();
      std::size_t seen = max_size.load();
      while (size > seen && !max_size.compare_exchange_weak(seen, size)) {
      }
      if (!r) {
        if (r.error().code() == ErrorCode::kResourceExhausted) {
          full.fetch_add(1);
        } else {
          violations.fetch_add(1);
        }
        continue;
      }
      if (r->outcome != ClaimOutcome::kAcquired) continue;
      acquired.fetch_add(1);
      switch (SplitMix64(rng) % 3) {
        case 0:
          (void)store->Complete(TestId(k), r->token, Response{200, {}, "x"});
          break;
        case 1:
          (void)store->Release(TestId(k), r->token);
          break;
        default:
          break;  // Abandoned: expires or is taken over.
      }
      if (i % 100 == 0) (void)store->PurgeExpired(now, 4);
    }
  });

  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(acquired.load(), 0);
  EXPECT_LE(max_size.load(), kCapacity);
  EXPECT_LE(store->size(), kCapacity);
  // Everything has expired by then; a purge empties the store.
  const std::size_t held = store->size();
  EXPECT_EQ(store->PurgeExpired(kT0 + hours(1), kCapacity).value(), held);
  EXPECT_EQ(store->size(), 0u);
}

// Free slots are spread over per-thread stripes: the bound must still be
// exact. Many threads fill the store (exactly `capacity` claims succeed),
// release part of it from their own threads (the freed slots park in their
// stripes), and one more thread must then find every one of them.
TEST(MemoryStoreStressTest, CapacityIsExactAcrossThreads) {
  constexpr std::size_t kCapacity = 1000;
  constexpr int kPerThread = 100;  // 16 x 100 attempts > kCapacity.
  auto store = OpenStore(kCapacity);
  std::atomic<int> acquired{0};
  std::atomic<int> full{0};
  std::atomic<int> released{0};
  std::atomic<int> errors{0};
  std::barrier filled(kThreads);

  RunThreads(kThreads, [&](int t) {
    std::vector<std::optional<Token>> mine;
    for (int i = 0; i < kPerThread; ++i) {
      const int k = t * kPerThread + i;
      auto r =
          store->Claim(TestId(k), TestFingerprint(k), kT0, hours(1), hours(1));
      if (!r) {
        (r.error().code() == ErrorCode::kResourceExhausted ? full : errors)
            .fetch_add(1);
        mine.emplace_back(std::nullopt);
        continue;
      }
      if (r->outcome != ClaimOutcome::kAcquired) errors.fetch_add(1);
      acquired.fetch_add(1);
      mine.push_back(r->token);
    }
    // Give back every third record this thread holds, once every thread
    // has stopped claiming.
    filled.arrive_and_wait();
    for (int i = 0; i < kPerThread; i += 3) {
      const int k = t * kPerThread + i;
      if (!mine[i].has_value()) continue;
      if (store->Release(TestId(k), *mine[i]).value_or(false)) {
        released.fetch_add(1);
      } else {
        errors.fetch_add(1);
      }
    }
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(acquired.load(), static_cast<int>(kCapacity));
  EXPECT_EQ(full.load(), kThreads * kPerThread - static_cast<int>(kCapacity));
  ASSERT_GT(released.load(), 0);
  EXPECT_EQ(store->size(), kCapacity - released.load());

  // A new thread: every released slot is claimable, then the store is full.
  int refilled = 0;
  std::thread([&] {
    for (int k = 0; k < static_cast<int>(kCapacity); ++k) {
      auto r = store->Claim(TestId(100000 + k), TestFingerprint(k), kT0,
                            hours(1), hours(1));
      if (!r) {
        EXPECT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
        break;
      }
      ++refilled;
    }
  }).join();
  EXPECT_EQ(refilled, released.load());
  EXPECT_EQ(store->size(), kCapacity);
}

// Threads that live for a few calls each: their hazard registrations must be
// reused and what they retired must be freed after they exit.
TEST(MemoryStoreStressTest, ShortLivedThreadsReuseRegistrations) {
  constexpr int kRounds = 30;
  constexpr int kPerRound = 8;
  auto store = OpenStore(32);
  const hazard::DomainStats before = hazard::GetStats();
  std::atomic<int> errors{0};

  for (int round = 0; round < kRounds; ++round) {
    RunThreads(kPerRound, [&](int t) {
      for (int i = 0; i < 40; ++i) {
        const int k = (t + i) % 16;
        auto r = store->Claim(TestId(k), TestFingerprint(k), kT0, hours(1),
                              hours(1));
        if (!r) {
          errors.fetch_add(1);
          continue;
        }
        if (r->outcome == ClaimOutcome::kAcquired &&
            !store->Release(TestId(k), r->token).value_or(false)) {
          errors.fetch_add(1);
        }
      }
    });
  }
  EXPECT_EQ(errors.load(), 0);

  const hazard::DomainStats after = hazard::GetStats();
  // At most kPerRound threads plus this one were registered at once.
  EXPECT_LE(after.thread_records,
            std::max<std::size_t>(before.thread_records, kPerRound + 1));
  EXPECT_LE(after.thread_records_in_use, 1u);
  // Nothing is protected now: one collection frees every orphan.
  hazard::Collect();
  EXPECT_EQ(hazard::GetStats().orphans, 0u);
}

// Destroying a store while other threads' retired objects are still pending
// and then reusing those threads with a new store.
TEST(MemoryStoreStressTest, StoresComeAndGoWhileThreadsRun) {
  std::atomic<int> errors{0};
  for (int round = 0; round < 10; ++round) {
    auto store = OpenStore(16);
    RunThreads(4, [&](int t) {
      for (int i = 0; i < 100; ++i) {
        const int k = (t * 7 + i) % 24;
        auto r = store->Claim(TestId(k), TestFingerprint(k), kT0 + seconds(i),
                              seconds(3), seconds(1));
        if (!r && r.error().code() != ErrorCode::kResourceExhausted) {
          errors.fetch_add(1);
        }
        if (r && r->outcome == ClaimOutcome::kAcquired && i % 2 == 0) {
          (void)store->Complete(TestId(k), r->token, Response{});
        }
      }
    });
  }
  EXPECT_EQ(errors.load(), 0);
}

// The byte budget under 16 threads that claim, complete (bodies of varied
// sizes), release and fail: the bytes charged never exceed max_bytes and,
// once the threads are done, equal exactly what the successful calls were
// charged; then one thread can fill what is left to within one record.
TEST(MemoryStoreStressTest, BytesAreExactAcrossThreads) {
  constexpr std::size_t kMaxBytes = 64 << 10;
  constexpr int kPerThread = 200;
  auto opened = MemoryStore::Open(
      MemoryStoreOptions{.capacity = 100000, .max_bytes = kMaxBytes});
  ASSERT_TRUE(opened.has_value());
  MemoryStore& store = **opened;
  std::atomic<std::size_t> charged{0};
  std::atomic<int> full{0};
  std::atomic<int> errors{0};
  std::atomic<bool> over{false};
  RunThreads(kThreads, [&](int t) {
    for (int i = 0; i < kPerThread; ++i) {
      const int k = t * kPerThread + i;
      auto r =
          store.Claim(TestId(k), TestFingerprint(k), kT0, hours(1), hours(1));
      if (store.bytes() > kMaxBytes) over = true;
      if (!r) {
        (r.error().code() == ErrorCode::kResourceExhausted ? full : errors)
            .fetch_add(1);
        continue;
      }
      if (r->outcome != ClaimOutcome::kAcquired) errors.fetch_add(1);
      if (k % 3 == 0) {
        if (!store.Release(TestId(k), r->token).value_or(false)) {
          errors.fetch_add(1);
        }
        continue;
      }
      std::size_t mine = MemoryStore::kRecordBytes;
      const Response response{201, {}, std::string((k * 37) % 700, 'b')};
      auto done = store.Complete(TestId(k), r->token, response);
      if (done.has_value() && *done) {
        mine += MemoryStore::ResponseBytes(response);
      } else if (done.has_value() ||
                 done.error().code() != ErrorCode::kResourceExhausted) {
        errors.fetch_add(1);
      } else {
        full.fetch_add(1);  // Left in progress, still charged its record.
      }
      charged.fetch_add(mine);
      if (store.bytes() > kMaxBytes) over = true;
    }
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_FALSE(over.load());
  EXPECT_GT(full.load(), 0) << "the budget was never reached";
  EXPECT_EQ(store.bytes(), charged.load());
  ASSERT_LE(store.bytes(), kMaxBytes);

  // A new thread claims until the budget is spent: what is left is less
  // than one record, wherever the other threads parked their credits.
  std::thread([&] {
    for (int k = 0; k < 100000; ++k) {
      auto r = store.Claim(TestId(1000000 + k), TestFingerprint(k), kT0,
                           hours(1), hours(1));
      if (!r) {
        EXPECT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
        break;
      }
      charged.fetch_add(MemoryStore::kRecordBytes);
    }
  }).join();
  EXPECT_EQ(store.bytes(), charged.load());
  EXPECT_LE(store.bytes(), kMaxBytes);
  EXPECT_LT(kMaxBytes - store.bytes(), MemoryStore::kRecordBytes);
}

}  // namespace
}  // namespace idem
