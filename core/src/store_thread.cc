// See store_thread.h.

#include "idem/store/store_thread.h"

#include <utility>

namespace idem {

StoreThread::~StoreThread() { Join(); }

void StoreThread::Join() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void StoreThread::Post(std::function<void()> call) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
    // Only an empty queue can have the thread asleep: a queue that holds
    // calls is the thread's next batch.
    wake = queue_.empty();
    queue_.push_back(std::move(call));
  }
  if (wake) cv_.notify_one();
}

bool StoreThread::Pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return !queue_.empty();
}

void StoreThread::Run() {
  std::vector<std::function<void()>> batch;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // Stopping, and every call made.
    batch.swap(queue_);
    lock.unlock();
    for (std::function<void()>& call : batch) call();
    batch.clear();
    if (after_batch_) after_batch_();
    lock.lock();
  }
}

}  // namespace idem
