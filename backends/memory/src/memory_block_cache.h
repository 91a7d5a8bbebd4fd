// A per-thread cache of freed blocks for the memory store's chains of one and
// two entries (the usual sizes, since buckets >= capacity), in front of the
// store's own memory (memory_record_memory.h).
//
// Every change allocates a chain and frees an old one a little later, in a
// batch once no hazard pointer holds it; through malloc that was half of a
// claim's cost (free-list consolidation of the cold blocks), from this cache
// it is a few loads and stores, and takes no lock. Blocks are plain memory,
// so a block freed by one store may serve another. Bounded: beyond kCached
// blocks per size (about two scan batches of memory_hazard.cc), and when the
// thread exits, blocks go back to RecordMemory.
//
// Thread-safety: per thread by construction (thread_local state).

#ifndef IDEM_BACKENDS_MEMORY_BLOCK_CACHE_H_
#define IDEM_BACKENDS_MEMORY_BLOCK_CACHE_H_

#include <cstddef>
#include <new>

#include "memory_poison.h"
#include "memory_record_memory.h"

namespace idem::memory_internal {

class BlockCache {
 public:
  static constexpr std::size_t kSizes = 2;  // Chains of 1 and 2 entries.
  static constexpr std::size_t kCached = 256;

  // A block for a chain of `entries` entries, `bytes` long, or null.
  static void* Take(std::size_t entries, std::size_t bytes) {
    if (entries == 0 || entries > kSizes || t_state.closed) return nullptr;
    Bin& bin = t_state.bins[entries - 1];
    if (bin.count == 0) return nullptr;
    void* block = bin.blocks[--bin.count];
    ASAN_UNPOISON_MEMORY_REGION(block, bytes);
    return block;
  }
  // Keeps `block` (from a chain of `entries` entries, `bytes` long) if there
  // is room; returns false when the caller must free it.
  static bool Put(std::size_t entries, void* block, std::size_t bytes) {
    if (entries == 0 || entries > kSizes || t_state.closed) return false;
    Bin& bin = t_state.bins[entries - 1];
    if (bin.count == kCached) return false;
    if (bin.count == 0) t_drain.Arm();
    ASAN_POISON_MEMORY_REGION(block, bytes);
    bin.bytes = bytes;
    bin.blocks[bin.count++] = block;
    return true;
  }

 private:
  struct Bin {
    void* blocks[kCached];
    std::size_t count;
    std::size_t bytes;  // Of each block (one chain size per bin).
  };
  // Trivially destructible, so usable during thread exit after the drainer
  // below ran (the hazard scheme's teardown may free chains then: they bypass
  // the cache).
  struct State {
    Bin bins[kSizes];
    bool closed;
  };
  // Frees the cached blocks when the thread exits and closes the cache.
  struct Drain {
    bool armed = false;
    void Arm() { armed = true; }
    ~Drain() {
      t_state.closed = true;
      for (Bin& bin : t_state.bins) {
        while (bin.count > 0) {
          void* block = bin.blocks[--bin.count];
          ASAN_UNPOISON_MEMORY_REGION(block, bin.bytes);
          RecordMemory::Free(block, bin.bytes);
        }
      }
    }
  };
  static thread_local State t_state;
  static thread_local Drain t_drain;
};

inline thread_local BlockCache::State BlockCache::t_state{};
inline thread_local BlockCache::Drain BlockCache::t_drain;

}  // namespace idem::memory_internal

#endif  // IDEM_BACKENDS_MEMORY_BLOCK_CACHE_H_
