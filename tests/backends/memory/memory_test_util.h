// What the memory store tests share besides tests/support/ids.h: a fixed
// starting time (no test reads the real clock).

#ifndef IDEM_TESTS_BACKENDS_MEMORY_MEMORY_TEST_UTIL_H_
#define IDEM_TESTS_BACKENDS_MEMORY_MEMORY_TEST_UTIL_H_

#include <chrono>

#include "idem/clock.h"
#include "support/ids.h"

namespace idem::memory_test {

inline constexpr TimePoint kT0{std::chrono::hours(24 * 365 * 50)};

}  // namespace idem::memory_test

#endif  // IDEM_TESTS_BACKENDS_MEMORY_MEMORY_TEST_UTIL_H_
