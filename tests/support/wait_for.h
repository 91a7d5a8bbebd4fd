// Bounded polling for the state of another thread or process.
//
// For waiting until a background thread, a child process or a server has
// reached a state (a sweeper ran, a port answers, a file appeared), never for
// timing: a test that needs time to pass moves a ManualClock instead. The
// default timeout is generous so that a loaded 2-core machine passes.

#ifndef IDEM_TESTS_SUPPORT_WAIT_FOR_H_
#define IDEM_TESTS_SUPPORT_WAIT_FOR_H_

#include <chrono>
#include <functional>

namespace idem::testing {

inline constexpr std::chrono::seconds kDefaultWaitTimeout{120};

// Calls `done` every `poll` until it returns true (then true) or `timeout`
// has passed (then the result of one last call).
bool WaitFor(const std::function<bool()>& done,
             std::chrono::milliseconds timeout = kDefaultWaitTimeout,
             std::chrono::milliseconds poll = std::chrono::milliseconds(20));

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_WAIT_FOR_H_
