// The options of the lock-free in-memory store (memory_store.h): what
// MemoryStore::Open takes, each field with its URI parameter and its default.
// In a header of its own so that the store's internal parts include the
// options without the store's class.
//
// Thread-safety: plain values.

#ifndef IDEM_MEMORY_STORE_OPTIONS_H_
#define IDEM_MEMORY_STORE_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <string>

namespace idem {

struct MemoryStoreOptions {
  // The most records held at once, live or expired-but-not-reclaimed. The
  // hash index (8 bytes per bucket, capacity rounded up to a power of two)
  // is allocated at Open; each held record costs about 150 bytes more, plus
  // its stored response. Must be in [1, MemoryStore::kMaxCapacity]; URI
  // parameter `capacity`.
  // Default: 1'000'000.
  std::size_t capacity = 1'000'000;

  // The most bytes the held records may be charged (see "Bytes" in
  // memory_store.h): claims and completes that would exceed it fail with
  // kResourceExhausted. 256 MiB holds a million in-progress or small completed
  // records, or 250 responses of 1 MiB. Must be in [MemoryStore::kMinMaxBytes,
  // MemoryStore::kMaxMaxBytes]; URI parameter `max_bytes` (a byte count).
  // Default: 268'435'456 (256 MiB).
  std::size_t max_bytes = kDefaultMaxBytes;

  static constexpr std::size_t kDefaultMaxBytes = std::size_t{256} << 20;
};

}  // namespace idem

#endif  // IDEM_MEMORY_STORE_OPTIONS_H_
