// What the crash tests share: how many kill-and-restart rounds a test runs
// (its default, or IDEM_CRASH_ROUNDS (1-1000) when set, so that a slow
// build (the sanitizers) can run fewer and a soak run more), the clock
// they time rounds on, and the lock timeout they start idem-demo with.
//
// Thread-safety: reads the environment only.

#ifndef IDEM_TESTS_CRASH_CRASH_ROUNDS_H_
#define IDEM_TESTS_CRASH_CRASH_ROUNDS_H_

#include <chrono>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace idem::testing {

// Rounds and waits are timed on the steady clock.
using CrashClock = std::chrono::steady_clock;

// --lock-timeout (seconds) of the demo a crash test kills: short, so that
// a lock the killed demo left times out within a round.
inline constexpr int kCrashLockTimeoutSeconds = 2;

// `default_rounds`, or IDEM_CRASH_ROUNDS. A value that is not a whole
// number from 1 to 1000 fails the current test (naming the variable) and
// gives the default.
inline int CrashRounds(int default_rounds) {
  const char* text = std::getenv("IDEM_CRASH_ROUNDS");
  if (text == nullptr || *text == '\0') return default_rounds;
  char* end = nullptr;
  const long rounds = std::strtol(text, &end, 10);
  if (*end != '\0' || rounds < 1 || rounds > 1000) {
    ADD_FAILURE() << "IDEM_CRASH_ROUNDS must be a whole number from 1 to "
                     "1000, got '"
                  << text << "'";
    return default_rounds;
  }
  return static_cast<int>(rounds);
}

}  // namespace idem::testing

#endif  // IDEM_TESTS_CRASH_CRASH_ROUNDS_H_
