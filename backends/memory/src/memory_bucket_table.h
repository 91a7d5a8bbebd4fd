// The memory store's hash index: a fixed array of buckets (a power of two),
// each pointing to the immutable Chain of the records hashed to it, or null.
// Allocated once, at Open; buckets are never added or removed.

#ifndef IDEM_BACKENDS_MEMORY_BUCKET_TABLE_H_
#define IDEM_BACKENDS_MEMORY_BUCKET_TABLE_H_

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "idem/types.h"
#include "memory_chain.h"

namespace idem::memory_internal {

class BucketTable {
 public:
  // `count` null buckets; count must be a power of two. Throws
  // std::bad_alloc when they cannot be allocated.
  explicit BucketTable(std::size_t count);

  std::size_t size() const { return count_; }
  std::atomic<Chain*>& operator[](std::size_t i) { return buckets_[i]; }

  std::atomic<Chain*>& For(const RecordId& id) {
    // Ids are SHA-256 outputs, but a multiplicative mix keeps hand-made ids
    // (tests, tools) from piling into one bucket.
    const std::uint64_t h = id.Prefix64() * 0x9E3779B97F4A7C15ull;
    return buckets_[static_cast<std::size_t>(h >> shift_)];
  }

 private:
  struct Free {
    void operator()(std::atomic<Chain*>* buckets) const;
  };

  const std::size_t count_;
  const int shift_;  // 64 - log2(count_).
  const std::unique_ptr<std::atomic<Chain*>[], Free> buckets_;
};

}  // namespace idem::memory_internal

#endif  // IDEM_BACKENDS_MEMORY_BUCKET_TABLE_H_
