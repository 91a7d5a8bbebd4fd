// The memory store's own memory (memory_record_memory.h) and the stored
// responses kept in it (memory_stored_response.h).
#include "memory_record_memory.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "idem/memory_store.h"
#include "memory_hazard.h"
#include "memory_stored_response.h"
#include "memory_test_util.h"

namespace idem {
namespace {

using memory_internal::RecordMemory;
using memory_internal::StoredResponse;
using testing::TestFingerprint;
using testing::TestId;

bool Aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % RecordMemory::kAlignment == 0;
}

TEST(RecordMemoryTest, SizeClassesRoundUpAndLargeBlocksAreExact) {
  EXPECT_EQ(RecordMemory::BlockBytes(1), 64u);
  EXPECT_EQ(RecordMemory::BlockBytes(64), 64u);
  EXPECT_EQ(RecordMemory::BlockBytes(65), 128u);
  EXPECT_EQ(RecordMemory::BlockBytes(1024), 1024u);
  EXPECT_EQ(RecordMemory::BlockBytes(1025), 1280u);
  EXPECT_EQ(RecordMemory::BlockBytes(1280), 1280u);
  EXPECT_EQ(RecordMemory::BlockBytes(1281), 1536u);
  EXPECT_EQ(RecordMemory::BlockBytes(2048), 2048u);
  EXPECT_EQ(RecordMemory::BlockBytes(2049), 2560u);
  EXPECT_EQ(RecordMemory::BlockBytes(3000), 3072u);
  EXPECT_EQ(RecordMemory::BlockBytes(40000), 40960u);
  EXPECT_EQ(RecordMemory::BlockBytes(RecordMemory::kLargestClass),
            RecordMemory::kLargestClass);
  EXPECT_EQ(RecordMemory::BlockBytes(RecordMemory::kLargestClass + 1),
            RecordMemory::kLargestClass + 1);
}

// Every block is aligned, distinct from the others alive, holds what is
// written to it whole, and is counted in use until freed.
TEST(RecordMemoryTest, BlocksAreDistinctAlignedAndCounted) {
  const RecordMemory::Usage before = RecordMemory::InUse();
  const std::vector<std::size_t> sizes = {1,
                                          8,
                                          63,
                                          64,
                                          65,
                                          200,
                                          1000,
                                          1024,
                                          1025,
                                          5000,
                                          40000,
                                          RecordMemory::kLargestClass,
                                          RecordMemory::kLargestClass + 1,
                                          300000};
  struct Block {
    unsigned char* p;
    std::size_t bytes;
  };
  std::vector<Block> blocks;
  std::size_t expected_bytes = 0;
  for (int round = 0; round < 3; ++round) {
    for (std::size_t bytes : sizes) {
      auto* p = static_cast<unsigned char*>(RecordMemory::Allocate(bytes));
      ASSERT_TRUE(Aligned(p)) << bytes;
      std::memset(p, static_cast<int>(blocks.size() & 0xff), bytes);
      blocks.push_back(Block{p, bytes});
      expected_bytes += RecordMemory::BlockBytes(bytes);
    }
  }
  const RecordMemory::Usage during = RecordMemory::InUse();
  EXPECT_EQ(during.blocks - before.blocks, blocks.size());
  EXPECT_EQ(during.bytes - before.bytes, expected_bytes);
  // No two blocks overlap, and none was written over by another.
  std::vector<Block> sorted = blocks;
  std::sort(sorted.begin(), sorted.end(),
            [](const Block& a, const Block& b) { return a.p < b.p; });
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    EXPECT_LE(sorted[i - 1].p + sorted[i - 1].bytes, sorted[i].p);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto fill = static_cast<unsigned char>(i & 0xff);
    EXPECT_TRUE(std::all_of(blocks[i].p, blocks[i].p + blocks[i].bytes,
                            [&](unsigned char c) { return c == fill; }))
        << "block " << i;
  }
  for (const Block& b : blocks) RecordMemory::Free(b.p, b.bytes);
  const RecordMemory::Usage after = RecordMemory::InUse();
  EXPECT_EQ(after.blocks, before.blocks);
  EXPECT_EQ(after.bytes, before.bytes);
  // The slabs stay; the blocks above kLargestClass went back.
  EXPECT_EQ(
      after.reserved_bytes + 3 * (RecordMemory::kLargestClass + 1 + 300000),
      during.reserved_bytes);
}

// A freed block serves the next allocation of its class: records that come
// and go reuse the same memory instead of growing it.
TEST(RecordMemoryTest, FreedBlocksAreReusedByTheirClass) {
  void* a = RecordMemory::Allocate(300);
  RecordMemory::Free(a, 300);
  void* b = RecordMemory::Allocate(290);  // The same class (320 bytes).
  EXPECT_EQ(a, b);
  RecordMemory::Free(b, 290);
}

// Many threads allocating and freeing blocks of every class at once (and
// handing blocks to each other) never get the same block twice (run under
// ThreadSanitizer too).
TEST(RecordMemoryTest, ConcurrentCallersNeverShareABlock) {
  const RecordMemory::Usage before = RecordMemory::InUse();
  constexpr int kThreads = 8;
  constexpr int kRounds = 2000;
  std::atomic<bool> overlap{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &overlap] {
      std::vector<std::pair<std::uint64_t*, std::size_t>> held;
      for (int i = 0; i < kRounds; ++i) {
        const std::size_t bytes =
            8 + static_cast<std::size_t>((i * 131 + t * 17) % 3000);
        auto* p = static_cast<std::uint64_t*>(RecordMemory::Allocate(bytes));
        const std::uint64_t mark = (static_cast<std::uint64_t>(t) << 32) | i;
        p[0] = mark;
        held.emplace_back(p, bytes);
        if (held.size() > 16) {
          // Checked before it is given back: nobody else wrote into it.
          auto [q, n] = held.front();
          if ((q[0] >> 32) != static_cast<std::uint64_t>(t)) overlap = true;
          RecordMemory::Free(q, n);
          held.erase(held.begin());
        }
      }
      for (auto [q, n] : held) {
        if ((q[0] >> 32) != static_cast<std::uint64_t>(t)) overlap = true;
        RecordMemory::Free(q, n);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(RecordMemory::InUse().blocks, before.blocks);
}

// A fork while other threads allocate and free: the child's first
// allocation of every class must not wait for a mutex a thread of the
// parent held at the fork (the child has no such thread). A child that
// hangs is killed by its alarm and fails the test.
TEST(RecordMemoryTest, AChildProcessAllocatesAfterAForkDuringUse) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int t = 0; t < 2; ++t) {
    busy.emplace_back([&stop, t] {
      std::size_t i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::size_t bytes = 1 + (i++ * 97 + t * 31) % 70000;
        RecordMemory::Free(RecordMemory::Allocate(bytes), bytes);
      }
    });
  }
  for (int f = 0; f < 20; ++f) {
    const pid_t pid = fork();
    ASSERT_NE(pid, -1);
    if (pid == 0) {
      alarm(20);
      for (std::size_t bytes = 1; bytes <= RecordMemory::kLargestClass;
           bytes += 61) {
        RecordMemory::Free(RecordMemory::Allocate(bytes), bytes);
      }
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "fork " << f << ": the child did not finish (status " << status
        << ")";
  }
  stop = true;
  for (auto& th : busy) th.join();
}

TEST(StoredResponseTest, CopiesShareOneBlockFreedByTheLast) {
  const Response response{
      201, {{"Location", "/orders/1"}, {"X-Empty", ""}}, std::string(500, 'r')};
  const RecordMemory::Usage before = RecordMemory::InUse();
  {
    StoredResponse a = StoredResponse::Make(response, 777);
    EXPECT_EQ(RecordMemory::InUse().blocks, before.blocks + 1);
    StoredResponse b = a;
    StoredResponse c = std::move(b);
    EXPECT_FALSE(b);  // NOLINT(bugprone-use-after-move): moved-from is empty.
    EXPECT_EQ(RecordMemory::InUse().blocks, before.blocks + 1);
    EXPECT_EQ(a.charge(), 777u);
    EXPECT_EQ(*c.ToResponse(), response);
    a = StoredResponse();
    EXPECT_EQ(*c.ToResponse(), response);
    EXPECT_EQ(RecordMemory::InUse().blocks, before.blocks + 1);
  }
  EXPECT_EQ(RecordMemory::InUse().blocks, before.blocks);
  EXPECT_EQ(StoredResponse().ToResponse(), nullptr);
  EXPECT_EQ(StoredResponse().charge(), 0u);
}

// A store's completed records give their memory back when they go, whether
// released, revoked, purged, replaced or dropped with the store.
TEST(StoredResponseTest, RecordsGiveTheirMemoryBack) {
  constexpr std::uint64_t kRecords = 64;
  // Bodies far larger than any chain: their blocks dominate.
  const Response response{200, {}, std::string(6000, 'm')};
  hazard::Collect();
  const RecordMemory::Usage before = RecordMemory::InUse();
  {
    auto opened = MemoryStore::Open(MemoryStoreOptions{.capacity = 256});
    ASSERT_TRUE(opened.has_value());
    MemoryStore& store = **opened;
    for (std::uint64_t i = 0; i < kRecords; ++i) {
      auto claimed =
          store.Claim(TestId(i), TestFingerprint(i), memory_test::kT0,
                      std::chrono::hours(1), std::chrono::seconds(60));
      ASSERT_TRUE(claimed.has_value());
      ASSERT_TRUE(store.Complete(TestId(i), claimed->token, response).value());
    }
    EXPECT_GE(RecordMemory::InUse().bytes - before.bytes, kRecords * 6000);
    // What an operator sees of it.
    const MemoryStoreStats stats = store.stats();
    EXPECT_GE(stats.pool_bytes_in_use, kRecords * 6000);
    EXPECT_GE(stats.pool_bytes_reserved, stats.pool_bytes_in_use);
    // Some go one by one, the rest with the store.
    ASSERT_TRUE(store.Revoke(TestId(0)).value());
    ASSERT_TRUE(store
                    .PurgeExpired(memory_test::kT0 + std::chrono::hours(2),
                                  /*limit=*/8)
                    .has_value());
  }
  hazard::Collect();
  // What is left in use is at most the chains the thread's block cache
  // keeps (memory_block_cache.h), far less than one record's body each.
  const RecordMemory::Usage after = RecordMemory::InUse();
  EXPECT_LT(after.bytes - std::min(after.bytes, before.bytes),
            kRecords * 6000 / 4);
}

}  // namespace
}  // namespace idem
