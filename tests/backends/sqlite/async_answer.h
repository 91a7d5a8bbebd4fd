// One asynchronous store call's answer, for the SQLite store's and its
// writer's tests: how often `done` was called, and the first result.
//
// Thread-safety: the callback may run on any thread; the object must
// outlive it (Wait, or the store's destruction, says it ran).

#ifndef IDEM_TESTS_BACKENDS_SQLITE_ASYNC_ANSWER_H_
#define IDEM_TESTS_BACKENDS_SQLITE_ASYNC_ANSWER_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <utility>

#include "idem/error.h"
#include "idem/store.h"

namespace idem::testing {

// How long a test waits for an answer at most: generous, for a loaded
// (or sanitized) 2-core machine.
inline constexpr auto kAnswerBound = std::chrono::seconds(120);

// One call's answer: Callback() is its `done`.
template <typename T>
class Answer {
 public:
  StoreCallback<T> Callback() {
    return [this](Result<T> result) {
      std::lock_guard<std::mutex> lock(mu_);
      if (++calls_ == 1) result_.emplace(std::move(result));
      cv_.notify_all();  // Under mu_: Wait may return and destroy this.
    };
  }
  // The first answer, once there is one (nullopt after kAnswerBound).
  std::optional<Result<T>> Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kAnswerBound, [&] { return calls_ > 0; });
    return result_;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;                    // Guarded by mu_.
  std::optional<Result<T>> result_;  // Guarded by mu_.
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_BACKENDS_SQLITE_ASYNC_ANSWER_H_
