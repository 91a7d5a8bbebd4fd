// One Redis server as the Redis store sees it: a hiredis connection that
// runs pipelined commands under a timeout, and a bounded pool of them.
//
// Thread-safety: a Connection is used by one thread at a time (hiredis
// contexts are not thread-safe); the Pool hands connections over under its
// mutex, which is also what makes the handover visible to ThreadSanitizer.
// Pool methods may be called from any thread.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_CONNECTION_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_CONNECTION_H_

#include <hiredis/hiredis.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.h"

namespace idem::redis {

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r != nullptr) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// One command: its arguments, binary-safe.
using Command = std::vector<std::string_view>;

struct Endpoint {
  std::string host;
  int port = 6379;
  std::string Name() const { return host + ":" + std::to_string(port); }
};

struct ConnectOptions {
  std::string user;
  std::string password;
  int db = 0;  // SELECTed when not 0.
  std::chrono::milliseconds timeout{5000};
};

// The error a reply of type REDIS_REPLY_ERROR stands for: -OOM is
// kResourceExhausted; -READONLY, -LOADING, -BUSY, -CLUSTERDOWN,
// -MASTERDOWN, -TRYAGAIN kUnavailable; -WRONGTYPE kDataLoss (a key of ours
// that is not a hash); anything else kInternal. `context` starts the
// message.
Error ReplyError(const redisReply& reply, std::string_view context);

// Whether `reply` is an error whose first word is `code` ("NOSCRIPT").
bool IsError(const redisReply* reply, std::string_view code);

// Whether `reply` says that this server cannot serve the store now because
// of its role: -READONLY (a replica: after a failover the endpoint may
// name the promoted one), -LOADING, -MASTERDOWN, -CLUSTERDOWN, -TRYAGAIN.
// The command did not run. Pool::Run closes such a connection.
bool IsRoleError(const redisReply* reply);

// Whether `reply` refuses a connection that did not authenticate, or
// authenticated wrongly (-NOAUTH, -WRONGPASS): a configuration error.
bool IsAuthError(const redisReply* reply);

// The reply's string (status, bulk or error), empty for other types.
std::string_view ReplyText(const redisReply* reply);

class Connection {
 public:
  // Connects to `endpoint` within options.timeout, then AUTH and SELECT.
  // Errors: kUnavailable (no connection, a timeout, -LOADING), kInternal
  // (AUTH or SELECT refused). `display` names the server in messages.
  static Result<std::unique_ptr<Connection>> Open(const Endpoint& endpoint,
                                                  const ConnectOptions& options,
                                                  const std::string& display);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends `commands` in one write and reads one reply per command. Error
  // replies are replies. A broken connection, a timeout or a protocol error
  // is kUnavailable and marks the connection broken; whether the commands
  // ran is then unknown.
  Result<std::vector<Reply>> Run(std::span<const Command> commands);

  bool broken() const { return broken_; }
  // Closes it when its lease ends (Pool::Run, after a role error).
  void MarkBroken() { broken_ = true; }

  // Whether an idle connection can be lent out again: not broken, and not
  // closed by the server while it sat in the pool (its socket is readable
  // then). The poll is skipped for a connection returned in the last few
  // milliseconds: a server restart takes longer than that.
  bool Reusable(std::chrono::steady_clock::time_point now) const;
  void MarkReturned(std::chrono::steady_clock::time_point now) {
    returned_at_ = now;
  }

 private:
  Connection(redisContext* context, std::string display)
      : context_(context), display_(std::move(display)) {}

  redisContext* const context_;
  const std::string display_;
  std::chrono::steady_clock::time_point returned_at_{};
  bool broken_ = false;
};

class Pool {
 public:
  Pool(Endpoint endpoint, ConnectOptions options, std::size_t max_size,
       std::chrono::milliseconds acquire_timeout, std::string display);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // A connection lent to one caller, given back when the lease ends
  // (closed instead when it broke).
  class Lease {
   public:
    Lease(Pool* pool, std::unique_ptr<Connection> connection)
        : pool_(pool), connection_(std::move(connection)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (connection_ != nullptr) pool_->GiveBack(std::move(connection_));
    }
    Connection& operator*() const { return *connection_; }
    Connection* operator->() const { return connection_.get(); }

   private:
    Pool* pool_;
    std::unique_ptr<Connection> connection_;
  };

  // An idle connection, or a new one while fewer than max_size are open;
  // otherwise waits up to acquire_timeout for one.
  // Errors: kUnavailable (the wait timed out, or connecting failed); what
  // Connection::Open returns.
  Result<Lease> Acquire();

  // Leases a connection and runs `commands` on it. With `resends` > 0, a
  // connection that broke after sending is replaced by a fresh one and the
  // commands are sent again, up to `resends` times: only for commands
  // that recognise their own earlier run. A connection whose first reply
  // is a role error (IsRoleError) is closed, never reused, and the
  // commands, which did not run, are sent once more on a fresh connection
  // (connecting resolves the host name again, so an endpoint that moved
  // to a promoted replica is followed); a second role error is returned
  // as the reply.
  Result<std::vector<Reply>> Run(std::span<const Command> commands,
                                 int resends = 0);

  const Endpoint& endpoint() const { return endpoint_; }
  const std::string& display() const { return display_; }
  std::size_t max_size() const { return max_size_; }

 private:
  void GiveBack(std::unique_ptr<Connection> connection);

  const Endpoint endpoint_;
  const ConnectOptions options_;
  const std::size_t max_size_;
  const std::chrono::milliseconds acquire_timeout_;
  const std::string display_;

  std::mutex mu_;  // Guards idle_ and open_.
  std::condition_variable freed_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::size_t open_ = 0;  // Lent out plus idle.
};

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_CONNECTION_H_
