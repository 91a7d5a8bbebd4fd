// A lazy store's first connection (connect=lazy: the PostgreSQL store's
// PostgresConnect::kLazy), for any store on a server: a thread that runs
// the store's start (connect, then check or create its schema) until it
// succeeds, and the gate every call of the store passes first
// (StoreBoundary::BeforeCall is the place). An eager store is marked
// connected by Open and has no thread.
//
// Thread-safety: Connected may be called from any number of threads at
// once; Begin, MarkConnected and Stop from the store's owner (Open and the
// destructor).

#ifndef IDEM_STORE_LAZY_CONNECT_H_
#define IDEM_STORE_LAZY_CONNECT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "idem/error.h"
#include "idem/log.h"

namespace idem {

class LazyConnect {
 public:
  // `prefix` begins every message (the store's name and where it is, e.g.
  // "postgres store 'db' table \"t\": "); `log` gets the episode's lines
  // and may be empty.
  LazyConnect(std::string prefix, LogSink log);
  // Stop().
  ~LazyConnect();
  LazyConnect(const LazyConnect&) = delete;
  LazyConnect& operator=(const LazyConnect&) = delete;

  // An eager store: its start ran in Open and succeeded.
  void MarkConnected();

  // Starts the thread: runs `start` at once and, while it fails with
  // kUnavailable, again after `first`, doubling up to `max`. Logs the first
  // failure (kWarning) and the success after failures (kInfo), never each
  // retry. Any other error is a refusal: logged (kError), not retried.
  // `start` runs on that thread only; what it writes is visible to a caller
  // that Connected() answered OK.
  void Begin(std::function<Status()> start, std::chrono::milliseconds first,
             std::chrono::milliseconds max);

  // Ends the retries and waits for the thread (and an attempt under way).
  void Stop();

  // OK once `start` succeeded; kUnavailable otherwise, saying whether the
  // first attempt is under way, the last one failed (and why) or the
  // server refused the store (and why).
  Status Connected() const;

 private:
  void Run(const std::function<Status()>& start,
           std::chrono::milliseconds first, std::chrono::milliseconds max);
  void Log(LogLevel level, const std::string& message) const;

  const std::string prefix_;
  const LogSink log_;
  // Set (release) after `start` succeeded; read (acquire) by Connected.
  std::atomic<bool> connected_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // Guarded by mu_.
  bool refused_ = false;   // Guarded by mu_.
  std::string reason_;     // The last failure, without prefix_. Guarded by mu_.
  std::thread thread_;
};

}  // namespace idem

#endif  // IDEM_STORE_LAZY_CONNECT_H_
