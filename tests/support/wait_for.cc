#include "support/wait_for.h"

#include <thread>

namespace idem::testing {

bool WaitFor(const std::function<bool()>& done,
             std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(poll);
  }
  return done();
}

}  // namespace idem::testing
