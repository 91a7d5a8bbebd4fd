// The times the store tests claim at: a fixed start far from the epoch (the
// tests pass TimePoints, or a ManualClock set to it, and never read the real
// clock for a record), and the contract suite's ttl and lock timeout.

#ifndef IDEM_TESTS_SUPPORT_STORE_TIMES_H_
#define IDEM_TESTS_SUPPORT_STORE_TIMES_H_

#include <chrono>

#include "idem/clock.h"

namespace idem::testing {

inline constexpr TimePoint kT0{std::chrono::hours(24 * 365 * 50)};
inline constexpr Duration kTtl = std::chrono::hours(24);
inline constexpr Duration kLock = std::chrono::seconds(60);

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_STORE_TIMES_H_
