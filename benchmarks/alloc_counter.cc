// See alloc_counter.h. The replacement keeps the standard's behaviour
// (malloc, bad_alloc on failure, a unique pointer for size 0) and only
// counts; the array and aligned forms are left to the library, whose
// defaults call these.

#include "alloc_counter.h"

#include <cstdint>
#include <cstdlib>
#include <new>

namespace {
thread_local std::uint64_t t_allocations = 0;
thread_local std::uint64_t t_allocated_bytes = 0;
}  // namespace

void* operator new(std::size_t size) {
  ++t_allocations;
  t_allocated_bytes += size;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace idem::bench {

std::uint64_t ThreadAllocations() { return t_allocations; }
std::uint64_t ThreadAllocatedBytes() { return t_allocated_bytes; }

}  // namespace idem::bench
