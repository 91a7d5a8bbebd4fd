// A store whose claims and completions are asynchronous
// (StoreInfo::async_calls): the memory store behind a ForwardingStore that
// answers ClaimAsync and CompleteAsync on a thread of its own, as the
// SQLite writer and the Redis event loop do (or inside the call:
// answer_inside), for the tests of the Guard's
// and the adapters' asynchronous path. The answers can be held back
// (Hold, Let) to check what waits for them, and the store counts the
// calls each form received.
//
// Thread-safety: every call may come from any thread; the destructor
// answers what is still queued, then joins its thread.

#ifndef IDEM_TESTS_SUPPORT_THREADED_ASYNC_STORE_H_
#define IDEM_TESTS_SUPPORT_THREADED_ASYNC_STORE_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "idem/open_store.h"
#include "idem/store/forwarding_store.h"

namespace idem::testing {

class ThreadedAsyncStore final : public ForwardingStore {
 public:
  // Over a fresh memory store, or over `inner`.
  explicit ThreadedAsyncStore(std::shared_ptr<Store> inner = OpenMemory())
      : ForwardingStore(std::move(inner)), thread_([this] { Serve(); }) {}
  ~ThreadedAsyncStore() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      held_ = false;
    }
    cv_.notify_all();
    thread_.join();
  }

  StoreInfo Info() const override {
    StoreInfo info = ForwardingStore::Info();
    info.calls_may_block = true;
    info.async_calls = true;
    return info;
  }

  void ClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                  Duration ttl, Duration lock_timeout,
                  StoreCallback<ClaimResult> done) override {
    async_claims.fetch_add(1);
    if (answer_inside) {
      done(ForwardingStore::Claim(id, fp, now, ttl, lock_timeout));
      return;
    }
    Queue([this, id, fp, now, ttl, lock_timeout, done = std::move(done)] {
      done(ForwardingStore::Claim(id, fp, now, ttl, lock_timeout));
    });
  }
  void CompleteAsync(const RecordId& id, const Token& token,
                     std::shared_ptr<const idem::Response> response,
                     StoreCallback<bool> done) override {
    async_completes.fetch_add(1);
    if (answer_inside) {
      done(ForwardingStore::CompleteShared(id, token, std::move(response)));
      return;
    }
    Queue([this, id, token, response = std::move(response),
           done = std::move(done)]() mutable {
      done(ForwardingStore::CompleteShared(id, token, std::move(response)));
    });
  }
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override {
    claims.fetch_add(1);
    return ForwardingStore::Claim(id, fp, now, ttl, lock_timeout);
  }
  Result<bool> CompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const idem::Response> response) override {
    completes.fetch_add(1);
    return ForwardingStore::CompleteShared(id, token, std::move(response));
  }
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const idem::Response& response) override {
    completes.fetch_add(1);
    return ForwardingStore::Complete(id, token, response);
  }

  // Holds the answers back until Let (calls still queue).
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Let() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  // Calls queued and not answered yet.
  std::size_t waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

  // Calls the thread has answered, counted once each answer returned: a
  // test that sees it may destroy what the answer posted to (an
  // io_context whose post another thread is still inside must not be).
  std::size_t served() {
    std::lock_guard<std::mutex> lock(mu_);
    return served_;
  }

  // Answers ClaimAsync and CompleteAsync inside the call, on the caller's
  // thread, as a local cache's hit or a RocksDB claim that a record in
  // memory blocks does.
  std::atomic<bool> answer_inside{false};
  std::atomic<int> async_claims{0};
  std::atomic<int> async_completes{0};
  std::atomic<int> claims{0};     // Synchronous Claim calls.
  std::atomic<int> completes{0};  // Synchronous Complete calls.

 private:
  static std::shared_ptr<Store> OpenMemory() {
    auto opened = OpenStore("memory:?sweep_interval_s=0");
    return opened ? std::shared_ptr<Store>(std::move(*opened)) : nullptr;
  }
  void Queue(std::function<void()> call) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(call));
    }
    cv_.notify_all();
  }
  void Serve() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || (!held_ && !queue_.empty()); });
      if (queue_.empty()) return;  // Stopping, all answered.
      std::function<void()> call = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      call();
      lock.lock();
      ++served_;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool held_ = false;
  bool stopping_ = false;
  std::size_t served_ = 0;
  std::thread thread_;  // Last: started once the rest is ready.
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_THREADED_ASYNC_STORE_H_
