// The Redis store's asynchronous Claim and Complete (store.h, ClaimAsync
// and CompleteAsync; redis_store.h, "Asynchronous calls"): the same steps
// as the synchronous calls (redis_calls.h: the same commands and scripts,
// EVALSHA then EVAL after NOSCRIPT, WAIT when replicas are asked for, the
// same decoding and errors), sent through one AsyncLoop (redis_async_loop.h)
// instead of a pooled connection, each step continuing in the reply's
// callback on the loop thread. No thread waits for a call in flight.
//
// Bound: a call's every request carries the deadline now + the store's
// `timeout`, set when the call starts, so the call is answered within
// that time however many round trips it makes (kUnavailable "timed out"
// after it; the claim may or may not have been written, as for a
// synchronous call that timed out).
//
// Thread-safety: Claim and Complete may be called from any thread; `done`
// runs once, on the loop thread (or inside the call when the loop is
// closing). The destructor must not run concurrently with them; it
// answers every call in flight (kUnavailable) before it returns.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_ASYNC_CALLS_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_ASYNC_CALLS_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/store/claim_memo.h"
#include "idem/types.h"
#include "redis_async_loop.h"
#include "redis_connection.h"
#include "redis_script_runner.h"
#include "redis_scripts.h"

namespace idem::redis {

class AsyncCalls {
 public:
  // What the calls use of the store, which outlives them.
  struct Context {
    const ScriptRunner* runner;
    ClaimMemo* memo;
    std::string display;
    std::chrono::milliseconds timeout;
    int claim_attempts;
    // A completion found no record: logs, asks for a check, and returns
    // the answer (false).
    std::function<bool(const RecordId&)> vanished;
    // Tests' hook before a reclaim (RedisStoreTestPeer); may be empty.
    const std::function<void(int)>* reclaim_hook;
  };

  // Starts the loop's thread (it connects at the first call).
  AsyncCalls(Context context, Endpoint endpoint, ConnectOptions options);
  ~AsyncCalls();

  // Store::Claim's and CompleteShared's contracts; `key` is the record's.
  void Claim(const RecordId& id, std::string key, const Fingerprint& fp,
             TimePoint now, Duration ttl, Duration lock_timeout,
             StoreCallback<ClaimResult> done);
  void Complete(const RecordId& id, std::string key, const Token& token,
                std::shared_ptr<const Response> response,
                StoreCallback<bool> done);

 private:
  struct ClaimCall;
  struct CompleteCall;
  using Deadline = AsyncLoop::SteadyClock::time_point;
  using Then = std::function<void(Result<Reply>)>;

  // `command`, and WAIT after it when `waits`.
  std::vector<OwnedCommand> WithWait(OwnedCommand command, bool waits) const;
  // Sends `commands` (WithWait's) and answers `then` with the first reply,
  // or the error it or the WAIT's reply stands for (ScriptRunner::Answer).
  void Send(std::vector<OwnedCommand> commands, bool waits, Deadline deadline,
            Then then);
  // ScriptRunner::RunCommand and Run, through the loop.
  void RunCommand(const Command& command, bool wait, Deadline deadline,
                  Then then);
  void RunScript(const Script& script, const std::string& key,
                 std::span<const std::string_view> args, bool wait,
                 Deadline deadline, Then then);

  void ClaimSet(std::shared_ptr<ClaimCall> call);
  void ClaimFound(std::shared_ptr<ClaimCall> call,
                  Result<std::optional<std::string>> found);
  void CompleteWrite(std::shared_ptr<CompleteCall> call,
                     const ClaimFields& fields);

  const Context c_;
  AsyncLoop loop_;  // Last: its callbacks use the rest.
};

// The store's AsyncCalls, made at the first call rather than at Open: a
// store opened before a fork and used synchronously in the child has no
// thread to lose.
//
// Thread-safety: Get may be called from any thread; Stop and the
// destructor not concurrently with it.
class LazyAsyncCalls {
 public:
  explicit LazyAsyncCalls(std::function<std::unique_ptr<AsyncCalls>()> make)
      : make_(std::move(make)) {}
  ~LazyAsyncCalls() { Stop(); }

  AsyncCalls& Get() {
    AsyncCalls* calls = ptr_.load(std::memory_order_acquire);
    if (calls != nullptr) return *calls;
    std::lock_guard<std::mutex> lock(mu_);
    if (calls_ == nullptr) {
      calls_ = make_();
      ptr_.store(calls_.get(), std::memory_order_release);
    }
    return *calls_;
  }
  // Answers the calls in flight and stops the thread, if started.
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    ptr_.store(nullptr, std::memory_order_relaxed);
    calls_.reset();
  }

 private:
  const std::function<std::unique_ptr<AsyncCalls>()> make_;
  std::mutex mu_;  // Guards calls_.
  std::atomic<AsyncCalls*> ptr_{nullptr};
  std::unique_ptr<AsyncCalls> calls_;
};

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_ASYNC_CALLS_H_
