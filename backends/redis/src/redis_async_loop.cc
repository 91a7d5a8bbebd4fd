// See redis_async_loop.h: the loop, its queue and its deadlines. What
// touches hiredis' context (connecting, the event hooks, the callbacks) is
// in redis_async_hiredis.cc.

#include "redis_async_loop.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace idem::redis {
namespace {

// The loop whose thread this is (Send from a callback need not wake it).
thread_local const AsyncLoop* tl_loop = nullptr;

}  // namespace

// Written here rather than by redisFormatCommandArgv, which returns a
// buffer of its own (and needs two arrays of the arguments first) that the
// string would copy: one allocation per command instead of four. The
// format is RESP's array of bulk strings; the tests check it against
// hiredis' own.
OwnedCommand Format(const Command& command) {
  std::size_t size = 16;
  for (std::string_view arg : command) size += arg.size() + 16;
  OwnedCommand out;
  out.reserve(size);
  out += '*';
  out += std::to_string(command.size());
  out += "\r\n";
  for (std::string_view arg : command) {
    out += '$';
    out += std::to_string(arg.size());
    out += "\r\n";
    out += arg;
    out += "\r\n";
  }
  return out;
}

OwnedCommand EvalInstead(const OwnedCommand& evalsha, std::string_view source) {
  // "*<n>\r\n" "$7\r\nEVALSHA\r\n" "$40\r\n<sha1>\r\n" <the rest>
  constexpr std::string_view kHead = "$7\r\nEVALSHA\r\n$40\r\n";
  const std::size_t count_end = evalsha.find("\r\n");
  const std::size_t sha = count_end + 2 + kHead.size();
  const std::size_t rest = sha + 40 + 2;
  if (count_end == std::string::npos || evalsha.size() < rest ||
      evalsha.compare(count_end + 2, kHead.size(), kHead) != 0 ||
      evalsha.compare(sha + 40, 2, "\r\n") != 0) {
    throw std::invalid_argument("not a formatted EVALSHA command");
  }
  OwnedCommand eval;
  eval.reserve(evalsha.size() - rest + count_end + source.size() + 32);
  eval.append(evalsha, 0, count_end + 2);
  eval.append("$4\r\nEVAL\r\n$");
  eval.append(std::to_string(source.size()));
  eval.append("\r\n");
  eval.append(source);
  eval.append("\r\n");
  eval.append(evalsha, rest);
  return eval;
}

AsyncLoop::AsyncLoop(Endpoint endpoint, ConnectOptions options,
                     std::string display)
    : endpoint_(std::move(endpoint)),
      options_(std::move(options)),
      display_(std::move(display)) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    throw std::system_error(errno, std::generic_category(), "eventfd");
  }
  thread_ = std::thread([this] { Run(); });
}

AsyncLoop::~AsyncLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
  thread_.join();
  ::close(wake_fd_);
}

void AsyncLoop::Send(std::vector<OwnedCommand> commands,
                     SteadyClock::time_point deadline, int resends,
                     RepliesCallback done) {
  auto request = std::make_unique<Request>();
  request->commands = std::move(commands);
  request->deadline = deadline;
  request->resends = resends;
  request->done = std::move(done);
  bool wake = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!closed_) {
      // The loop drains the queue before it polls again, so only the
      // first request queued while it waits needs to wake it.
      wake = incoming_.empty() && tl_loop != this;
      incoming_.push_back(std::move(request));
    }
  }
  if (request != nullptr) {  // Closed: answered here.
    request->done(MakeError(ErrorCode::kUnavailable,
                            display_ + ": the store is closing"));
    return;
  }
  if (wake) {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
}

void AsyncLoop::Run() {
  tl_loop = this;
  // Named for operators (top -H, /proc/<pid>/task/*/comm) and tests.
  pthread_setname_np(pthread_self(), kThreadName);
  for (;;) {
    std::vector<std::unique_ptr<Request>> batch;
    bool stop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(incoming_);
      stop = stop_;
    }
    Admit(std::move(batch));
    if (stop) break;
    if (!waiting_.empty() && conn_ == Conn::kNone) Connect();
    if (conn_ == Conn::kReady && !waiting_.empty()) Flush();
    const auto now = SteadyClock::now();
    Expire(now);
    int timeout_ms = PollTimeoutMs(now);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!incoming_.empty() || stop_) timeout_ms = 0;
    }
    Poll(timeout_ms);
  }
  Shutdown();
}

void AsyncLoop::Admit(std::vector<std::unique_ptr<Request>> batch) {
  for (auto& request : batch) {
    Request* r = request.get();
    r->at = deadlines_.emplace(r->deadline, std::move(request));
    waiting_.push_back(r);
  }
}

void AsyncLoop::Flush() {
  std::deque<Request*> sending;
  sending.swap(waiting_);
  for (Request* r : sending) {
    r->in_flight = true;
    r->lost = false;
    r->answered = 0;
    r->replies.clear();
    r->replies.resize(r->commands.size());
    std::size_t queued = 0;
    for (const OwnedCommand& command : r->commands) {
      if (ac_ == nullptr ||
          redisAsyncFormattedCommand(ac_, OnReply, r, command.data(),
                                     command.size()) != REDIS_OK) {
        break;
      }
      ++queued;
    }
    if (queued < r->commands.size()) {
      // Only a context being dropped refuses commands; the ones queued
      // get NULL replies then. Count the rest as answered, lost.
      r->lost = true;
      r->answered += r->commands.size() - queued;
      if (queued == 0) {
        r->in_flight = false;
        Lost(r, "connection lost");
      }
    }
  }
  // Written now rather than after the next poll: the socket is almost
  // always writable.
  if (ac_ != nullptr && want_write_) {
    redisAsyncHandleWrite(ac_);
    AfterHiredis();
  }
}

void AsyncLoop::Expire(SteadyClock::time_point now) {
  bool stuck = false;
  bool overdue = false;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now;
       ++it) {
    (it->second->in_flight ? stuck : overdue) = true;
  }
  if (overdue) {
    std::vector<Request*> late;
    std::erase_if(waiting_, [&](Request* r) {
      if (r->deadline > now) return false;
      late.push_back(r);
      return true;
    });
    for (Request* r : late) {
      Finish(r, MakeError(ErrorCode::kUnavailable, display_ + ": timed out"));
    }
  }
  if (stuck) {
    // Replies come in order: every request behind the late one waits too.
    Drop("timed out");
  } else if ((conn_ == Conn::kConnecting || conn_ == Conn::kSetup) &&
             now >= conn_deadline_) {
    conn_error_ =
        Error(ErrorCode::kUnavailable, display_ + ": cannot connect to " +
                                           endpoint_.Name() + ": timed out");
    Drop("connect timed out");
  }
}

int AsyncLoop::PollTimeoutMs(SteadyClock::time_point now) const {
  if (!waiting_.empty() && (conn_ == Conn::kNone || conn_ == Conn::kReady)) {
    return 0;  // Connect or send first.
  }
  std::optional<SteadyClock::time_point> next;
  if (!deadlines_.empty()) next = deadlines_.begin()->first;
  if (conn_ == Conn::kConnecting || conn_ == Conn::kSetup) {
    next = next ? std::min(*next, conn_deadline_) : conn_deadline_;
  }
  if (!next) return -1;
  if (*next <= now) return 0;
  const auto ms =
      std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
  return static_cast<int>(std::min<std::int64_t>(ms, 3600 * 1000));
}

void AsyncLoop::Poll(int timeout_ms) {
  pollfd fds[2] = {{.fd = wake_fd_, .events = POLLIN, .revents = 0}, {}};
  nfds_t n = 1;
  if (ac_ != nullptr && (want_read_ || want_write_)) {
    fds[1] = {.fd = ac_->c.fd,
              .events = static_cast<short>((want_read_ ? POLLIN : 0) |
                                           (want_write_ ? POLLOUT : 0)),
              .revents = 0};
    n = 2;
  }
  if (::poll(fds, n, timeout_ms) <= 0) return;  // Timeout, or EINTR.
  if ((fds[0].revents & POLLIN) != 0) {
    std::uint64_t count;
    (void)!::read(wake_fd_, &count, sizeof(count));
  }
  if (n < 2) return;
  const short events = fds[1].revents;
  // An error or hang-up is read: hiredis then finds it and drops the
  // connection (or fails the connect).
  if (ac_ != nullptr && (events & (POLLIN | POLLERR | POLLHUP)) != 0) {
    redisAsyncHandleRead(ac_);
    AfterHiredis();
  }
  if (ac_ != nullptr && (events & POLLOUT) != 0) {
    redisAsyncHandleWrite(ac_);
    AfterHiredis();
  }
}

void AsyncLoop::AfterHiredis() {
  if (ac_ != nullptr && drop_) redisAsyncFree(ac_);  // Fails what is sent.
  if (ac_ == nullptr) {
    if (conn_ != Conn::kNone && conn_ != Conn::kReady) {
      FailWaiting(conn_error_.value_or(Error(
          ErrorCode::kUnavailable, display_ + ": cannot connect to " +
                                       endpoint_.Name() + ": " +
                                       drop_.value_or("connection closed"))));
    }
    conn_ = Conn::kNone;
    conn_error_.reset();
    drop_.reset();
    want_read_ = want_write_ = false;
    return;
  }
  if (conn_ == Conn::kSetup && setup_pending_ == 0) SendSetup();
}

void AsyncLoop::Drop(std::string why) {
  if (ac_ == nullptr) return;
  if (!drop_) drop_ = std::move(why);
  AfterHiredis();
}

void AsyncLoop::FailWaiting(const Error& error) {
  std::deque<Request*> failed;
  failed.swap(waiting_);
  for (Request* r : failed) Finish(r, tl::unexpected(error));
}

void AsyncLoop::Finish(Request* request, Result<std::vector<Reply>> result) {
  RepliesCallback done = std::move(request->done);
  deadlines_.erase(request->at);  // Deletes the request.
  // A callback that throws would unwind through hiredis' C frames: the
  // store's callbacks catch everything themselves (redis_async_calls.cc).
  done(std::move(result));
}

void AsyncLoop::Lost(Request* request, std::string_view why) {
  request->in_flight = false;
  if (closing_) {
    Finish(request, MakeError(ErrorCode::kUnavailable,
                              display_ + ": the store is closing"));
  } else if (SteadyClock::now() >= request->deadline) {
    Finish(request,
           MakeError(ErrorCode::kUnavailable, display_ + ": timed out"));
  } else if (request->resends > 0) {
    --request->resends;
    waiting_.push_back(request);
  } else {
    Finish(request, MakeError(ErrorCode::kUnavailable,
                              display_ + ": " + std::string(why)));
  }
}

void AsyncLoop::Shutdown() {
  closing_ = true;
  std::vector<std::unique_ptr<Request>> rest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;  // Every later Send answers at once.
    rest.swap(incoming_);
  }
  Admit(std::move(rest));
  FailWaiting(
      Error(ErrorCode::kUnavailable, display_ + ": the store is closing"));
  if (ac_ != nullptr) {
    drop_ = "the store is closing";
    redisAsyncFree(ac_);  // Every request sent gets a NULL reply: Lost.
    ac_ = nullptr;
  }
  // Nothing is left: a request is waiting, in flight or answered.
  while (!deadlines_.empty()) {
    Finish(deadlines_.begin()->second.get(),
           MakeError(ErrorCode::kUnavailable,
                     display_ + ": the store is closing"));
  }
}

}  // namespace idem::redis
