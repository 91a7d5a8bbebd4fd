// What the memory store tests share besides tests/support/ids.h: the fixed
// starting time of tests/support/store_times.h (no test reads the real
// clock).

#ifndef IDEM_TESTS_BACKENDS_MEMORY_MEMORY_TEST_UTIL_H_
#define IDEM_TESTS_BACKENDS_MEMORY_MEMORY_TEST_UTIL_H_

#include "support/ids.h"
#include "support/store_times.h"

namespace idem::memory_test {

using ::idem::testing::kT0;

}  // namespace idem::memory_test

#endif  // IDEM_TESTS_BACKENDS_MEMORY_MEMORY_TEST_UTIL_H_
