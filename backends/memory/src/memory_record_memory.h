// The memory store's own memory for what its records keep: their chains
// (memory_chain.h) and their stored responses (memory_stored_response.h).
//
// Why not the process's allocator: a record outlives the requests around
// it. Kept in malloc's heap, each record's blocks sit between the short-lived
// blocks of the request that made it, so the heap grows with records and the
// blocks requests free become holes scattered through it; the next requests
// are served from those cold holes (a cache miss per allocation in glibc's
// small bins) instead of from the hot blocks they just freed. Measured on
// gRPC fresh keys, the memory store's records in malloc's heap cost about a
// sixth of the server's calls/s (benchmarks/http/NOTES.md, "The memory
// store's records and malloc"). Here records take their blocks from slabs
// of their own, by size class, and the process's heap stays the requests'.
//
// Size classes: multiples of 64 bytes up to 1 KiB, then each doubling in
// four equal steps (1.25 KiB, 1.5, 1.75, 2, 2.5, ...) up to kLargestClass,
// so a block is at most a quarter larger than asked; a larger block is the
// process allocator's (operator new).
// A block is 64-byte aligned. Slabs (256 KiB, or 8 blocks of a larger class)
// come from operator new and are never given back: a freed block is kept
// for the next record of its class, in any store of the process, so the
// memory records took stays at its peak per class (bounded by the stores'
// max_bytes) until the process exits.
//
// Progress: a mutex per size class, held for a few loads and stores (and
// while that class takes a new slab). Thread-safety: every function may be
// called from any thread, at any time, also while threads and statics are
// destroyed (the state is never destroyed). fork() waits for every class's
// mutex (pthread_atfork), so a child process allocates as the parent does.
//
// Under AddressSanitizer a free block and the uncarved rest of a slab are
// poisoned: using a block after freeing it is reported as such.

#ifndef IDEM_BACKENDS_MEMORY_RECORD_MEMORY_H_
#define IDEM_BACKENDS_MEMORY_RECORD_MEMORY_H_

#include <cstddef>

namespace idem::memory_internal {

class RecordMemory {
 public:
  static constexpr std::size_t kAlignment = 64;
  static constexpr std::size_t kLargestClass = std::size_t{64} << 10;

  // A block of at least `bytes` bytes (> 0), aligned to kAlignment. Throws
  // std::bad_alloc when no memory is left.
  static void* Allocate(std::size_t bytes);
  // Gives back a block from Allocate(bytes), with the same `bytes`.
  static void Free(void* block, std::size_t bytes) noexcept;

  // What the blocks handed out and not yet freed amount to, process-wide:
  // their count, and the bytes their size classes round them up to; and the
  // bytes taken from the process allocator (slabs, never given back, and
  // the blocks above kLargestClass).
  struct Usage {
    std::size_t blocks = 0;
    std::size_t bytes = 0;
    std::size_t reserved_bytes = 0;
  };
  static Usage InUse();
  // The bytes a block of `bytes` takes (its size class; `bytes` itself above
  // kLargestClass).
  static std::size_t BlockBytes(std::size_t bytes);
};

}  // namespace idem::memory_internal

#endif  // IDEM_BACKENDS_MEMORY_RECORD_MEMORY_H_
