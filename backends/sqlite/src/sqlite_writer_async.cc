// The writer's own thread (sqlite_writer.h), for WriteAsync. Why a thread:
// an asynchronous caller (an adapter's I/O thread) must not wait for the
// writer, so somebody else has to run what it queued when no synchronous
// caller happens to lead a batch; one thread, always the same, also keeps
// the writer's connection on one thread most of the time. Why started
// lazily: a store used only synchronously keeps working after fork() (no
// thread to lose) and costs no idle thread.
//
// Why the thread leaves the idle writer to a waiting Hold: it drains the
// queue batch after batch, and under a steady stream of asynchronous calls
// the queue never empties, so without that a SqliteTransaction's Begin
// (which waits without a deadline while the writer merely writes) could
// wait for ever.

#include "sqlite_writer.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

namespace idem::sqlite_internal {

Writer::~Writer() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!server_.joinable()) return;
  stopping_ = true;
  WakeServer();
  lock.unlock();
  server_.join();
}

std::optional<Error> Writer::StartServing(std::string_view op) {
  if (stopping_) return Closing(op);
  if (!server_.joinable()) server_ = std::thread([this] { Serve(); });
  return std::nullopt;
}

void Writer::Serve() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (held_) {
      Clock::time_point next;
      if (ExpireOne(lock, next)) continue;
      if (next == Clock::time_point::max()) {
        serve_cv_.wait(lock);  // Release wakes it.
      } else {
        serve_cv_.wait_until(lock, next);
      }
      continue;
    }
    if (!writing_ && hold_waiters_ == 0 && !queue_.empty()) {
      writing_ = true;
      do {
        RunQueued(lock);
        cv_.notify_all();  // The synchronous callers of the batch that ran.
      } while (!queue_.empty() && hold_waiters_ == 0);
      writing_ = false;
      cv_.notify_all();  // A Hold that waits, or a caller that may lead.
      continue;
    }
    // Nobody else calls once the destructor runs: the queue stays empty.
    if (stopping_ && queue_.empty()) return;
    serve_cv_.wait(lock);
  }
}

bool Writer::ExpireOne(std::unique_lock<std::mutex>& lock,
                       Clock::time_point& next) {
  const Clock::time_point now = Clock::now();
  next = Clock::time_point::max();
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    WriteOp* w = *it;
    // Synchronous calls keep their own deadlines (Write).
    if (!w->async()) continue;
    if (w->deadline > now) {
      next = std::min(next, w->deadline);
      continue;
    }
    // Held, so nobody else takes calls off the queue.
    queue_.erase(it);
    lock.unlock();
    w->Fail(HeldTooLong(w->name()));
    w->Answer();
    lock.lock();
    return true;
  }
  return false;
}

}  // namespace idem::sqlite_internal
