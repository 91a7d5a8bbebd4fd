// What IdempotentMethods shares with every method it made: the Guard, the
// scope option, GuardCalls (the callback API's store calls) and the
// executor the callback API's calls run on. Thread-safety: immutable after
// IdempotentMethods::Create, except GuardCalls (thread-safe itself).

#ifndef IDEM_GRPC_SRC_ADAPTER_STATE_H_
#define IDEM_GRPC_SRC_ADAPTER_STATE_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/thread_pool.hpp>

#include "idem/asio/guard_calls.h"
#include "idem/grpc/idempotent_methods.h"
#include "idem/guard.h"
#include "idem/log.h"

namespace idem::grpc {

class AdapterState {
 public:
  std::shared_ptr<Guard> guard;
  ScopeResolver scope;
  std::unique_ptr<idem::asio::GuardCalls> calls;
  // The adapter's own pool when no executor was given.
  std::unique_ptr<net::thread_pool> pool;
  net::any_io_executor executor;
  // Whether a call ever continued on `executor` (the destructor's round
  // trip through it is needed only then, and its context ran then).
  std::atomic<bool> executor_used{false};
  LogSink log;

  void Log(LogLevel level, std::string_view message) const {
    if (log) log(level, message);
  }

  // Callback-API calls in flight, for the destructor's wait.
  void CallStarted() {
    std::lock_guard lock(mu_);
    ++running_;
  }
  void CallEnded() {
    std::lock_guard lock(mu_);
    if (--running_ == 0) idle_.notify_all();
  }
  void WaitIdle() {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [this] { return running_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable idle_;
  std::size_t running_ = 0;
};

}  // namespace idem::grpc

#endif  // IDEM_GRPC_SRC_ADAPTER_STATE_H_
