// StoreThread: one thread of a store's own that makes the store's
// asynchronous calls (Store::ClaimAsync, CompleteAsync) one after another,
// for a store whose calls do bounded local work but may wait inside (the
// RocksDB store: its write group, an id's stripe mutex, a table-file read).
// An adapter's I/O thread hands a call over without waiting and this
// thread makes it and answers. One thread, so the calls never wait for
// each other inside the store, and while calls keep coming it takes them
// in batches, without sleeping in between.
//
//   void MyStore::DoClaimAsync(..., StoreCallback<ClaimResult> done) {
//     thread_.Post([=, this, done = std::move(done)] {
//       done(Guarded("claim", [&] { return DoClaim(...); }));
//     });
//   }
//
// A store that gathers the writes of a batch's calls into one (the RocksDB
// store: one write to its log per batch) passes `after_batch`, which runs
// on the thread after the last call of every batch, before the thread
// takes the next batch or sleeps: there it writes what the calls staged
// and answers them.
//
// Started by the first Post (a store opened before a fork and used only
// synchronously is unaffected; a store whose thread ran is not usable in
// a forked child, as its engine's own threads are not).
//
// Thread-safety: Post may be called from any number of threads at once.
// The destructor (or Join) runs every call posted before it, then joins the
// thread; no Post may race it. A posted call must not throw (the thread would
// end the process): wrap the store call in CatchExceptions.

#ifndef IDEM_STORE_STORE_THREAD_H_
#define IDEM_STORE_STORE_THREAD_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace idem {

class StoreThread {
 public:
  StoreThread() = default;
  // `after_batch` runs on the thread after each batch of calls; it must not
  // throw. Default: nothing.
  explicit StoreThread(std::function<void()> after_batch)
      : after_batch_(std::move(after_batch)) {}
  ~StoreThread();
  StoreThread(const StoreThread&) = delete;
  StoreThread& operator=(const StoreThread&) = delete;

  // Queues `call` to run on the thread, after every call posted before it.
  void Post(std::function<void()> call);

  // Whether calls are queued for the thread's next batch. Called from
  // `after_batch`, true means after_batch runs again after that batch: a
  // store may leave the work of this one in flight until then (the
  // PostgreSQL store's pipeline), where false means it must finish it now.
  bool Pending();

  // Runs every call posted so far, then ends the thread (the destructor
  // does it too): for a store whose calls need what its destructor closes
  // first. No Post may race it or follow it.
  void Join();

 private:
  void Run();

  const std::function<void()> after_batch_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::function<void()>> queue_;  // Guarded by mu_.
  bool stopping_ = false;                     // Guarded by mu_.
  std::thread thread_;                        // Started under mu_.
};

}  // namespace idem

#endif  // IDEM_STORE_STORE_THREAD_H_
