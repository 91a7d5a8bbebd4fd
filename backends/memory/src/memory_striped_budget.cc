// See memory_striped_budget.h. Why stripes: a single shared counter, written by
// every claim, made the counter's cache line the bottleneck of claims on
// different threads. The order of the two steps of a refill (shared count
// first) and of a give-back (stripe first) is what keeps used() from ever
// reading low.

#include "memory_striped_budget.h"

#include <algorithm>

namespace idem::memory_internal {
namespace {

// Threads are spread over the stripes in the order they first use a budget
// (round robin, shared by all stores), so up to kStripes threads never share
// one; a hash of the thread id would put two of two threads together often.
std::atomic<std::size_t> next_thread_stripe{0};

}  // namespace

std::size_t ThisThreadStripe() {
  thread_local const std::size_t index =
      next_thread_stripe.fetch_add(1, std::memory_order_relaxed) % kStripes;
  return index;
}

StripedBudget::StripedBudget(std::size_t limit, std::size_t batch)
    : limit_(limit), batch_(std::max<std::size_t>(batch, 1)) {}

// `n` may be more than any one stripe holds (bytes): after the
// stripe and the shared count, this gathers every stripe's credits and takes
// only the rest from the shared count, giving everything back if that is not
// enough.
bool StripedBudget::TryReserve(std::size_t n) {
  Stripe& mine = Mine();
  std::size_t c = mine.credits.load(std::memory_order_relaxed);
  while (c >= n) {
    if (mine.credits.compare_exchange_weak(c, c - n, std::memory_order_acq_rel,
                                           std::memory_order_relaxed)) {
      return true;
    }
  }
  // n is bounded by memory and taken_ <= limit_: the sums cannot overflow.
  std::size_t t = taken_.load(std::memory_order_relaxed);
  while (t + n <= limit_) {
    const std::size_t take = std::min(n + batch_, limit_ - t);
    if (taken_.compare_exchange_weak(t, t + take, std::memory_order_acq_rel,
                                     std::memory_order_relaxed)) {
      if (take > n) {
        mine.credits.fetch_add(take - n, std::memory_order_acq_rel);
      }
      return true;
    }
  }
  // The shared count is at the limit: free units, if any, are parked in
  // stripes.
  std::size_t gathered = 0;
  for (Stripe& stripe : stripes_) {
    if (stripe.credits.load(std::memory_order_relaxed) == 0) continue;
    gathered += stripe.credits.exchange(0, std::memory_order_acq_rel);
    if (gathered >= n) break;
  }
  if (gathered < n) {
    const std::size_t rest = n - gathered;
    t = taken_.load(std::memory_order_relaxed);
    while (t + rest <= limit_) {
      if (taken_.compare_exchange_weak(t, t + rest, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
        gathered = n;
        break;
      }
    }
  }
  if (gathered < n) {
    if (gathered > 0) Release(gathered);
    return false;
  }
  if (gathered > n) Release(gathered - n);
  return true;
}

void StripedBudget::Release(std::size_t n) {
  if (n == 0) return;
  Stripe& mine = Mine();
  const std::size_t had = mine.credits.fetch_add(n, std::memory_order_acq_rel);
  // Keep one batch here for this thread's next reservations; give the rest
  // back to the shared count, where every thread finds it without a scan.
  if (had + n <= 2 * batch_) return;
  std::size_t c = had + n;
  while (c > batch_) {
    if (mine.credits.compare_exchange_weak(c, batch_, std::memory_order_acq_rel,
                                           std::memory_order_relaxed)) {
      taken_.fetch_sub(c - batch_, std::memory_order_acq_rel);
      return;
    }
  }
}

std::size_t StripedBudget::used() const {
  // Credits first, then the shared count: a refill or give-back running
  // meanwhile makes the result high for an instant, never low.
  std::size_t credits = 0;
  for (const Stripe& s : stripes_) {
    credits += s.credits.load(std::memory_order_acquire);
  }
  const std::size_t taken = taken_.load(std::memory_order_acquire);
  return taken > credits ? taken - credits : 0;
}

}  // namespace idem::memory_internal
