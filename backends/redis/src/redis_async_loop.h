// One asynchronous hiredis connection to one Redis server, driven by one
// thread of its own: the transport of the Redis store's asynchronous calls
// (redis_async_calls.h, store.h's ClaimAsync and CompleteAsync).
//
// Why a loop of our own: a redisAsyncContext needs an event loop to tell it
// when its socket is readable or writable, and hiredis ships adapters only
// for event libraries (libevent, libuv, ae, ...) that the store must not
// depend on (nor on Asio: the store is used by every adapter). The loop
// here is poll(2) over two descriptors, the connection's socket and an
// eventfd that other threads write to when they queue a request; it
// implements hiredis' five event hooks (addRead, delRead, addWrite,
// delWrite, cleanup) as flags that the next poll reads.
//
// Why one thread: a redisAsyncContext is not thread-safe, so every hiredis
// call is made on the loop thread; other threads hand requests over
// through a queue under a mutex. Requests are pipelined on the one
// connection: any number may be in flight, answered in order.
//
// Bounds: every request has a deadline. A request not answered by then
// fails with kUnavailable ("timed out"): the connection, stuck behind it,
// is dropped (the other requests in flight on it are resent on a new one
// if they may be, as a broken connection's are, or fail), and the next
// request connects again. Connecting is redisAsyncConnect (non-blocking)
// on the loop thread, bounded by the connect options' timeout; then AUTH
// and SELECT (ConnectOptions) before any request is sent. A connection
// that cannot be made fails the requests waiting for it with the reason.
//
// Thread-safety: Send may be called from any thread, the loop's own
// included (from a callback). Callbacks run on the loop thread, outside
// every lock of the loop, each exactly once. The destructor must not run
// concurrently with Send; it fails every request not yet answered
// (kUnavailable, "closed"), calls its callback, and joins the thread.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_ASYNC_LOOP_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_ASYNC_LOOP_H_

#include <hiredis/async.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "idem/error.h"
#include "redis_connection.h"

namespace idem::redis {

// One command in Redis's wire format (RESP), formatted on the caller's
// thread (the caller's arguments may be gone by the time the loop
// sends it). One block per command, not one per argument: each is
// allocated by the calling thread and freed by the loop's, which glibc's
// allocator pays for per block.
using OwnedCommand = std::string;

// `command` formatted, as redisFormatCommandArgv formats it.
OwnedCommand Format(const Command& command);

// `evalsha`, a formatted EVALSHA <sha1> <numkeys> <args...>, as EVAL
// <source> with the same numkeys and arguments: for a server that answered
// NOSCRIPT. Throws std::invalid_argument when `evalsha` is not such a
// command.
OwnedCommand EvalInstead(const OwnedCommand& evalsha, std::string_view source);

// One request's answer: one reply per command, or why there is none.
using RepliesCallback = std::function<void(Result<std::vector<Reply>>)>;

class AsyncLoop {
 public:
  using SteadyClock = std::chrono::steady_clock;

  // The loop thread's name (at most 15 characters).
  static constexpr char kThreadName[] = "idem-redis-loop";

  // `display` names the server in messages. The thread starts here.
  AsyncLoop(Endpoint endpoint, ConnectOptions options, std::string display);
  ~AsyncLoop();
  AsyncLoop(const AsyncLoop&) = delete;
  AsyncLoop& operator=(const AsyncLoop&) = delete;

  // Sends `commands` pipelined on the connection and calls `done` with one
  // reply per command (error replies are replies), by `deadline`.
  // Failures (kUnavailable): the deadline passed ("timed out"); the
  // connection broke after sending, `resends` times already (a request is
  // resent on a new connection only when its commands recognise their own
  // earlier run, as Pool::Run's are); no connection could be made (the
  // reason); the loop is closing. A first reply that is a role error
  // (IsRoleError) drops the connection and the request is sent once more
  // on a new one, as Pool::Run does. `done` may be called inside Send
  // only when the loop is closed.
  void Send(std::vector<OwnedCommand> commands,
            SteadyClock::time_point deadline, int resends,
            RepliesCallback done);

 private:
  struct Request;
  using Deadlines =
      std::multimap<SteadyClock::time_point, std::unique_ptr<Request>>;
  struct Request {
    std::vector<OwnedCommand> commands;
    SteadyClock::time_point deadline;
    int resends = 0;
    bool role_resent = false;
    RepliesCallback done;
    Deadlines::iterator at;  // Its entry in deadlines_, which owns it.
    // The send in flight, if any.
    bool in_flight = false;
    bool lost = false;
    std::size_t answered = 0;  // Callbacks received for this send.
    std::vector<Reply> replies;
  };
  enum class Conn { kNone, kConnecting, kSetup, kReady };

  void Run();
  void Admit(std::vector<std::unique_ptr<Request>> batch);
  // redis_async_hiredis.cc: a new context; AUTH and SELECT once connected.
  void Connect();
  void SendSetup();
  void Flush();
  void Expire(SteadyClock::time_point now);
  int PollTimeoutMs(SteadyClock::time_point now) const;
  void Poll(int timeout_ms);
  // After every hiredis call that may drop the connection.
  void AfterHiredis();
  void Drop(std::string why);
  void FailWaiting(const Error& error);
  void Finish(Request* request, Result<std::vector<Reply>> result);
  void Lost(Request* request, std::string_view why);
  void Shutdown();

  // hiredis' hooks (ev.*) and callbacks; `data` is the AsyncLoop.
  static void AddRead(void* data);
  static void DelRead(void* data);
  static void AddWrite(void* data);
  static void DelWrite(void* data);
  static void Cleanup(void* data);
  static void OnConnect(const redisAsyncContext* ac, int status);
  static void OnSetupReply(redisAsyncContext* ac, void* reply, void* privdata);
  static void OnReply(redisAsyncContext* ac, void* reply, void* privdata);

  const Endpoint endpoint_;
  const ConnectOptions options_;
  const std::string display_;
  int wake_fd_ = -1;  // eventfd: a request was queued, or stop.

  std::mutex mu_;  // Guards incoming_, stop_ and closed_.
  std::vector<std::unique_ptr<Request>> incoming_;
  bool stop_ = false;
  bool closed_ = false;  // Send fails at once.

  // The loop thread's alone.
  Deadlines deadlines_;           // Every request not yet answered.
  std::deque<Request*> waiting_;  // Not sent yet (no ready connection).
  redisAsyncContext* ac_ = nullptr;
  Conn conn_ = Conn::kNone;
  SteadyClock::time_point conn_deadline_{};
  std::size_t setup_pending_ = 0;
  std::optional<Error> conn_error_;  // Why the connection attempt failed.
  std::optional<std::string> drop_;  // Why we dropped it (to do / done).
  bool want_read_ = false;
  bool want_write_ = false;
  bool closing_ = false;

  std::thread thread_;  // Last: started when the rest is ready.
};

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_ASYNC_LOOP_H_
