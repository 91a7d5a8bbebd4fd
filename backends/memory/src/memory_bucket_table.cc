#include "memory_bucket_table.h"

#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace idem::memory_internal {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Claims on a large table touch a random bucket each: with 4 KiB pages that
// is a TLB miss as well as a cache miss. Asking for transparent huge pages
// (Linux, when THP is in "madvise" or "always" mode; a hint, ignored
// elsewhere) makes most of those lookups hit the TLB.
std::atomic<Chain*>* Allocate(std::size_t count) {
  const std::size_t bytes = count * sizeof(std::atomic<Chain*>);
  void* mem = nullptr;
  if (bytes >= kHugePage) {
    mem = std::aligned_alloc(kHugePage,
                             (bytes + kHugePage - 1) & ~(kHugePage - 1));
#ifdef MADV_HUGEPAGE
    if (mem != nullptr) ::madvise(mem, bytes, MADV_HUGEPAGE);
#endif
  } else {
    mem = std::malloc(bytes);
  }
  if (mem == nullptr) throw std::bad_alloc();
  auto* buckets = static_cast<std::atomic<Chain*>*>(mem);
  for (std::size_t i = 0; i < count; ++i) {
    ::new (&buckets[i]) std::atomic<Chain*>(nullptr);
  }
  return buckets;
}

}  // namespace

BucketTable::BucketTable(std::size_t count)
    : count_(count),
      shift_(64 - std::countr_zero(count)),
      buckets_(Allocate(count)) {}

void BucketTable::Free::operator()(std::atomic<Chain*>* buckets) const {
  // std::atomic<Chain*> is trivially destructible.
  std::free(buckets);
}

}  // namespace idem::memory_internal
