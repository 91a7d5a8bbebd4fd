// A bounded count of units (record slots, bytes) that many threads reserve
// and give back without sharing one cache line: the memory store's capacity
// and byte bounds are two instances.
//
// `used()` never exceeds `limit()`, under any concurrency. A thread reserves
// from the credits parked in its stripe, refills them in batches from the
// shared count, and when the shared count is at the limit gathers the credits
// parked in every stripe before answering "no"; so near the limit a call may
// fail while another thread briefly holds the units it needs.
//
// Thread-safety: every member may be called concurrently. Lock-free: no call
// waits for another thread.

#ifndef IDEM_BACKENDS_MEMORY_STRIPED_BUDGET_H_
#define IDEM_BACKENDS_MEMORY_STRIPED_BUDGET_H_

#include <atomic>
#include <cstddef>

namespace idem::memory_internal {

// Stripes per budget (and per store, for its other per-thread counters).
inline constexpr std::size_t kStripes = 16;

// The stripe of the calling thread, in [0, kStripes).
std::size_t ThisThreadStripe();

class StripedBudget {
 public:
  // `limit` units in all; each stripe keeps up to about `batch` spare units
  // for its threads' next reservations (batch >= 1).
  StripedBudget(std::size_t limit, std::size_t batch);

  StripedBudget(const StripedBudget&) = delete;
  StripedBudget& operator=(const StripedBudget&) = delete;

  // Reserves `n` units and returns true, or returns false, reserving
  // nothing, when fewer than `n` are free.
  bool TryReserve(std::size_t n);
  // Gives back `n` units reserved earlier (by any thread).
  void Release(std::size_t n);

  // Units reserved now: exact when no call is running, otherwise high by at
  // most the calls in flight, never low, never above limit().
  std::size_t used() const;
  std::size_t limit() const { return limit_; }

 private:
  struct alignas(64) Stripe {
    std::atomic<std::size_t> credits{0};
  };

  Stripe& Mine() { return stripes_[ThisThreadStripe()]; }

  const std::size_t limit_;
  const std::size_t batch_;
  // Units taken from the limit: reserved plus credits parked in stripes.
  alignas(64) std::atomic<std::size_t> taken_{0};
  Stripe stripes_[kStripes];
};

}  // namespace idem::memory_internal

#endif  // IDEM_BACKENDS_MEMORY_STRIPED_BUDGET_H_
