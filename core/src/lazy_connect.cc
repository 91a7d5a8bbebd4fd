// See idem/store/lazy_connect.h. Why a thread rather than connecting inside
// the first calls: a call must not wait connect_timeout (plus the schema's
// statements) on a server that is down, and many calls arriving at once
// would each try; one thread retries with a capped back-off and the calls
// fail at once until it has succeeded.

#include "idem/store/lazy_connect.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace idem {

LazyConnect::LazyConnect(std::string prefix, LogSink log)
    : prefix_(std::move(prefix)), log_(std::move(log)) {}

LazyConnect::~LazyConnect() { Stop(); }

void LazyConnect::MarkConnected() {
  connected_.store(true, std::memory_order_release);
}

void LazyConnect::Begin(std::function<Status()> start,
                        std::chrono::milliseconds first,
                        std::chrono::milliseconds max) {
  thread_ = std::thread([this, start = std::move(start), first, max] {
    try {
      Run(start, first, max);
    } catch (...) {  // Out of memory building a message: stay unavailable.
      std::lock_guard<std::mutex> lock(mu_);
      refused_ = true;
      reason_ = "unexpected exception while connecting";
    }
  });
}

void LazyConnect::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status LazyConnect::Connected() const {
  if (connected_.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lock(mu_);
  if (refused_) {
    return MakeError(ErrorCode::kUnavailable,
                     prefix_ +
                         "refused at its first connection (connect=lazy), so "
                         "it stays unavailable until reopened: " +
                         reason_);
  }
  if (reason_.empty()) {
    return MakeError(ErrorCode::kUnavailable,
                     prefix_ +
                         "not connected yet (connect=lazy): the first "
                         "attempt is under way");
  }
  return MakeError(ErrorCode::kUnavailable,
                   prefix_ +
                       "not connected yet (connect=lazy; retrying in the "
                       "background): " +
                       reason_);
}

void LazyConnect::Run(const std::function<Status()>& start,
                      std::chrono::milliseconds first,
                      std::chrono::milliseconds max) {
  auto pause = first;
  for (int attempts = 1;; ++attempts) {
    const Status started = start();
    if (started) {
      connected_.store(true, std::memory_order_release);
      if (attempts > 1) {
        Log(LogLevel::kInfo, prefix_ + "connected after " +
                                 std::to_string(attempts) +
                                 " attempts (connect=lazy); calls are served");
      }
      return;
    }
    // The store's errors begin with its prefix: the reason without it.
    std::string_view why = started.error().message();
    if (why.starts_with(prefix_)) why.remove_prefix(prefix_.size());
    const bool refused = started.error().code() != ErrorCode::kUnavailable;
    std::unique_lock<std::mutex> lock(mu_);
    reason_ = std::string(why);
    refused_ = refused;
    if (refused) {
      lock.unlock();
      Log(LogLevel::kError,
          prefix_ +
              "refused at its first connection (connect=lazy), not retried; "
              "every call answers unavailable until the store is reopened: " +
              std::string(why));
      return;
    }
    if (attempts == 1) {
      lock.unlock();
      Log(LogLevel::kWarning,
          prefix_ + "cannot connect yet (connect=lazy): " + std::string(why) +
              "; every call answers unavailable until a connection "
              "succeeds; retrying in the background, at most every " +
              std::to_string(max.count()) + " ms");
      lock.lock();
    }
    if (cv_.wait_for(lock, pause, [&] { return stopping_; })) return;
    pause = std::min(pause * 2, max);
  }
}

void LazyConnect::Log(LogLevel level, const std::string& message) const {
  if (log_) log_(level, message);
}

}  // namespace idem
