// Whether the Redis store may serve calls now, and the background thread
// that keeps that answer current (redis_store.h, "Connecting" and "Safety
// checks"):
//  - eager (connect=eager): Start() connects and checks the servers
//    (redis_server_checks.h) before Open returns, and fails with what it
//    found;
//  - lazy (connect=lazy): Start() returns at once; the thread connects,
//    retrying with a back-off from kFirstRetry doubling to kMaxRetry, and
//    logs one warning per episode of failures (not one per attempt) and
//    one line when it connects;
//  - once connected, the thread checks the servers again every
//    check_interval, and soon after Poke() (an -OOM, an odd reply, a
//    record that vanished), at most once per kMinPokeGap.
// A check that refuses a server (an evicting policy, NOAUTH, an old
// version) is logged as an error and makes every call kUnavailable until
// a later check passes (logged too). A check that cannot reach a server
// changes nothing once connected: the calls fail on their own and the
// pool reconnects.
//
// Thread-safety: every method may be called from any thread, except the
// destructor, which stops the thread (waiting for a check under way, at
// most the store's timeout per server).

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_WATCH_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_WATCH_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "idem/error.h"
#include "idem/log.h"
#include "redis_router.h"
#include "redis_server_checks.h"

namespace idem::redis {

class ServerWatch {
 public:
  struct Options {
    bool lazy = false;
    bool allow_eviction = false;
    std::chrono::milliseconds check_interval{10000};
    std::string display;  // Names the store in messages.
    LogSink log;          // May be empty.
  };

  static constexpr std::chrono::milliseconds kFirstRetry{100};
  static constexpr std::chrono::milliseconds kMaxRetry{5000};
  static constexpr std::chrono::milliseconds kMinPokeGap{1000};

  // `router` must outlive the watch.
  ServerWatch(Router& router, Options options);
  ~ServerWatch();
  ServerWatch(const ServerWatch&) = delete;
  ServerWatch& operator=(const ServerWatch&) = delete;

  // Eager: the first connect and check, then the thread; errors are the
  // check's (redis_server_checks.h) or the router's. Lazy: the thread
  // only; never fails. Call once.
  Status Start();

  // Ok while connected and the last check passed; otherwise kUnavailable
  // saying why (not connected yet, with the last error; or refused, with
  // the refusal), `op` naming the call.
  Status Ready(std::string_view op) const;

  // Asks for a check soon.
  void Poke();

  // StoreInfo::durable: what the last passed check found; false until one
  // passed.
  bool durable() const { return durable_.load(std::memory_order_relaxed); }

 private:
  enum State : int { kConnecting, kServing, kRefused };

  struct Line {
    LogLevel level;
    std::string message;
  };

  Result<ServerReport> Check();
  // Moves the state by `result`; returns the lines to log (outside mu_).
  // Holds mu_.
  std::vector<Line> Apply(const Result<ServerReport>& result);
  void Log(const std::vector<Line>& lines) const;
  void Run();

  Router& router_;
  const Options o_;
  std::atomic<int> state_{kConnecting};
  std::atomic<bool> durable_{false};

  mutable std::mutex mu_;  // Guards the members below.
  std::condition_variable wake_;
  bool stop_ = false;
  bool poked_ = false;
  bool failing_ = false;  // An episode of connect failures was logged.
  int attempts_ = 0;      // Connect attempts in this episode.
  std::string why_;       // The last error or refusal.
  std::vector<std::string> warned_;  // The last check's warnings.
  std::chrono::steady_clock::time_point last_check_{};
  std::chrono::milliseconds backoff_ = kFirstRetry;
  std::thread thread_;
};

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_WATCH_H_
