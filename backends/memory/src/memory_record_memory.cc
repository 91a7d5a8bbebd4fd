#include "memory_record_memory.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <mutex>
#include <new>

#include <pthread.h>

#include "memory_poison.h"

namespace idem::memory_internal {
namespace {

constexpr std::size_t kGrain = RecordMemory::kAlignment;
constexpr std::size_t kFineLimit = 1024;  // Multiples of kGrain up to here.
constexpr std::size_t kFineClasses = kFineLimit / kGrain;
// Above kFineLimit, each doubling in this many equal steps: 1.25 KiB, 1.5,
// 1.75, 2, 2.5, 3, ... kLargestClass. A block is then at most a quarter
// larger than asked, which keeps the memory records take near what
// max_bytes charges them.
constexpr std::size_t kStepsPerDoubling = 4;
constexpr std::size_t kClasses =
    kFineClasses +
    kStepsPerDoubling *
        (std::bit_width(RecordMemory::kLargestClass / kFineLimit) - 1);
constexpr std::size_t kSlabBytes = std::size_t{256} << 10;
constexpr std::size_t kMinBlocksPerSlab = 8;

constexpr std::size_t ClassOf(std::size_t bytes) {
  if (bytes <= kFineLimit) {
    return (std::max<std::size_t>(bytes, 1) - 1) / kGrain;
  }
  // bytes in (base, 2 * base], base = kFineLimit << doubling.
  const std::size_t doubling = std::bit_width((bytes - 1) / kFineLimit) - 1;
  const std::size_t base = kFineLimit << doubling;
  const std::size_t step = base / kStepsPerDoubling;
  const std::size_t steps = (bytes - base + step - 1) / step;  // 1..4
  return kFineClasses + kStepsPerDoubling * doubling + steps - 1;
}

constexpr std::size_t ClassBytes(std::size_t c) {
  if (c < kFineClasses) return (c + 1) * kGrain;
  const std::size_t doubling = (c - kFineClasses) / kStepsPerDoubling;
  const std::size_t steps = (c - kFineClasses) % kStepsPerDoubling + 1;
  const std::size_t base = kFineLimit << doubling;
  return base + steps * (base / kStepsPerDoubling);
}

struct FreeBlock {
  FreeBlock* next;
};

// A slab starts with this header (one grain): the slabs of a class stay
// linked from the pool, so that leak checkers see them as reachable.
struct SlabHeader {
  SlabHeader* next;
};

struct alignas(64) SizeClass {
  std::mutex mutex;
  FreeBlock* free = nullptr;
  // The current slab's uncarved rest.
  char* next = nullptr;
  char* end = nullptr;
  SlabHeader* slabs = nullptr;
};

struct Pool {
  SizeClass classes[kClasses];
  std::atomic<std::size_t> blocks{0};
  std::atomic<std::size_t> bytes{0};
  std::atomic<std::size_t> reserved{0};
};

Pool* MakePool();

// Never destroyed: blocks are freed by thread-exit and static destructors.
Pool& ThePool() {
  static Pool* const pool = MakePool();
  return *pool;
}

// fork() copies a class's mutex as it is: held by another thread then, it
// would stay held in the child for ever, and the child's first record of
// that class would wait for ever. The fork waits for every class instead
// (as malloc's own locks do), and both sides go on with them free.
void LockAllForFork() {
  for (SizeClass& sc : ThePool().classes) sc.mutex.lock();
}
void UnlockAllAfterFork() {
  Pool& pool = ThePool();
  for (std::size_t i = kClasses; i-- > 0;) pool.classes[i].mutex.unlock();
}

Pool* MakePool() {
  auto* pool = new Pool();
  if (pthread_atfork(&LockAllForFork, &UnlockAllAfterFork,
                     &UnlockAllAfterFork) != 0) {
    // Only ENOMEM; without the hooks a fork while another thread holds a
    // class's mutex would leave the child's records of that class stuck.
    throw std::bad_alloc();
  }
  return pool;
}

static_assert(ClassBytes(0) == kGrain);
static_assert(kClasses == 40);
static_assert(ClassBytes(ClassOf(kFineLimit + 1)) == kFineLimit * 5 / 4);
static_assert(ClassBytes(ClassOf(2 * kFineLimit)) == 2 * kFineLimit);
static_assert(ClassBytes(ClassOf(RecordMemory::kLargestClass)) ==
              RecordMemory::kLargestClass);

}  // namespace

std::size_t RecordMemory::BlockBytes(std::size_t bytes) {
  return bytes > kLargestClass ? bytes : ClassBytes(ClassOf(bytes));
}

void* RecordMemory::Allocate(std::size_t bytes) {
  Pool& pool = ThePool();
  if (bytes > kLargestClass) {
    void* block = ::operator new (bytes, std::align_val_t{kAlignment});
    pool.blocks.fetch_add(1, std::memory_order_relaxed);
    pool.bytes.fetch_add(bytes, std::memory_order_relaxed);
    pool.reserved.fetch_add(bytes, std::memory_order_relaxed);
    return block;
  }
  const std::size_t c = ClassOf(bytes);
  const std::size_t block_bytes = ClassBytes(c);
  SizeClass& sc = pool.classes[c];
  void* block = nullptr;
  {
    std::lock_guard lock(sc.mutex);
    if (sc.free != nullptr) {
      FreeBlock* head = sc.free;
      ASAN_UNPOISON_MEMORY_REGION(head, sizeof(FreeBlock));
      sc.free = head->next;
      block = head;
    } else {
      if (sc.next == sc.end) {
        const std::size_t slab_bytes =
            kGrain + std::max(kSlabBytes, kMinBlocksPerSlab * block_bytes);
        // Under the class's mutex: only this class's callers wait for it.
        char* slab = static_cast<char*>(
            ::operator new (slab_bytes, std::align_val_t{kAlignment}));
        pool.reserved.fetch_add(slab_bytes, std::memory_order_relaxed);
        auto* header = ::new (slab) SlabHeader{sc.slabs};
        sc.slabs = header;
        sc.next = slab + kGrain;
        sc.end = sc.next + (slab_bytes - kGrain) / block_bytes * block_bytes;
        ASAN_POISON_MEMORY_REGION(sc.next, sc.end - sc.next);
      }
      block = sc.next;
      sc.next += block_bytes;
    }
  }
  ASAN_UNPOISON_MEMORY_REGION(block, block_bytes);
  pool.blocks.fetch_add(1, std::memory_order_relaxed);
  pool.bytes.fetch_add(block_bytes, std::memory_order_relaxed);
  return block;
}

void RecordMemory::Free(void* block, std::size_t bytes) noexcept {
  if (block == nullptr) return;
  Pool& pool = ThePool();
  pool.blocks.fetch_sub(1, std::memory_order_relaxed);
  if (bytes > kLargestClass) {
    pool.bytes.fetch_sub(bytes, std::memory_order_relaxed);
    pool.reserved.fetch_sub(bytes, std::memory_order_relaxed);
    ::operator delete (block, std::align_val_t{kAlignment});
    return;
  }
  const std::size_t c = ClassOf(bytes);
  const std::size_t block_bytes = ClassBytes(c);
  pool.bytes.fetch_sub(block_bytes, std::memory_order_relaxed);
  SizeClass& sc = pool.classes[c];
  std::lock_guard lock(sc.mutex);
  auto* freed = ::new (block) FreeBlock{sc.free};
  sc.free = freed;
  // The link stays readable to the next Allocate only.
  ASAN_POISON_MEMORY_REGION(block, block_bytes);
}

RecordMemory::Usage RecordMemory::InUse() {
  const Pool& pool = ThePool();
  return Usage{.blocks = pool.blocks.load(std::memory_order_relaxed),
               .bytes = pool.bytes.load(std::memory_order_relaxed),
               .reserved_bytes = pool.reserved.load(std::memory_order_relaxed)};
}

}  // namespace idem::memory_internal
