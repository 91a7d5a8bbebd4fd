#include "idem/token.h"

#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace idem {
namespace {

// Fills `out` from the kernel's CSPRNG (getrandom(2); it blocks only before
// the pool is first initialised at boot). False only when the kernel refuses.
bool FromKernel(std::uint8_t* out, std::size_t size) {
  while (size > 0) {
    const ssize_t n = getrandom(out, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// One syscall per token costs about 0.6 us; a per-thread page of kernel
// randomness brings that down to tens of ns. The page is marked
// MADV_WIPEONFORK, so a forked child finds it zeroed (armed == 0) and refills
// from the kernel instead of replaying its parent's bytes: unlike a
// pthread_atfork hook, this also holds for a raw clone() or vfork().
struct alignas(16) Pool {
  std::uint32_t armed;  // 1 once filled; 0 in a fresh or forked page.
  std::uint32_t next;   // Offset of the next unused byte in `bytes`.
  std::uint8_t pad[8];
  std::uint8_t bytes[4096 - 16];
};
static_assert(sizeof(Pool) == 4096);

class ThreadPool {
 public:
  ThreadPool() {
    void* page = mmap(nullptr, sizeof(Pool), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return;
    if (madvise(page, sizeof(Pool), MADV_WIPEONFORK) != 0) {
      // A kernel before 4.14: no safe way to keep bytes across a fork.
      munmap(page, sizeof(Pool));
      return;
    }
    pool_ = static_cast<Pool*>(page);
  }
  ~ThreadPool() {
    if (pool_ != nullptr) {
      std::memset(pool_, 0, sizeof(Pool));
      munmap(pool_, sizeof(Pool));
    }
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  bool Draw(std::uint8_t* out, std::size_t size) {
    if (pool_ == nullptr) return FromKernel(out, size);
    Pool& p = *pool_;
    if (p.armed != 1 || p.next + size > sizeof p.bytes) {
      if (!FromKernel(p.bytes, sizeof p.bytes)) return false;
      p.next = 0;
      p.armed = 1;
    }
    std::memcpy(out, p.bytes + p.next, size);
    // A drawn token is not left behind in memory.
    std::memset(p.bytes + p.next, 0, size);
    p.next += static_cast<std::uint32_t>(size);
    return true;
  }

 private:
  Pool* pool_ = nullptr;
};

}  // namespace

Token NewToken() {
  thread_local ThreadPool pool;
  Token t;
  if (pool.Draw(t.bytes.data(), t.bytes.size())) return t;
  // No randomness at all: a repeated fencing token could let a stale holder
  // complete another's claim, so stopping is the only safe answer.
  std::abort();
}

}  // namespace idem
