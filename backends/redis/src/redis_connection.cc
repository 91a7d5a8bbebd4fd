#include "redis_connection.h"

#include <poll.h>
#include <sys/time.h>

#include <array>
#include <cerrno>
#include <utility>

namespace idem::redis {
namespace {

using SteadyClock = std::chrono::steady_clock;

timeval ToTimeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

std::string_view FirstWord(std::string_view text) {
  return text.substr(0, text.find(' '));
}

}  // namespace

std::string_view ReplyText(const redisReply* reply) {
  if (reply == nullptr || reply->str == nullptr) return {};
  return {reply->str, reply->len};
}

bool IsError(const redisReply* reply, std::string_view code) {
  return reply != nullptr && reply->type == REDIS_REPLY_ERROR &&
         FirstWord(ReplyText(reply)) == code;
}

bool IsRoleError(const redisReply* reply) {
  return IsError(reply, "READONLY") || IsError(reply, "LOADING") ||
         IsError(reply, "MASTERDOWN") || IsError(reply, "CLUSTERDOWN") ||
         IsError(reply, "TRYAGAIN");
}

bool IsAuthError(const redisReply* reply) {
  return IsError(reply, "NOAUTH") || IsError(reply, "WRONGPASS");
}

Error ReplyError(const redisReply& reply, std::string_view context) {
  const std::string_view text = ReplyText(&reply);
  const std::string_view code = FirstWord(text);
  ErrorCode ec = ErrorCode::kInternal;
  if (code == "OOM") {
    ec = ErrorCode::kResourceExhausted;
  } else if (IsRoleError(&reply) || code == "BUSY") {
    ec = ErrorCode::kUnavailable;
  } else if (code == "WRONGTYPE") {
    ec = ErrorCode::kDataLoss;
  }
  return Error(ec, std::string(context) + ": " + std::string(text));
}

Result<std::unique_ptr<Connection>> Connection::Open(
    const Endpoint& endpoint, const ConnectOptions& options,
    const std::string& display) {
  const timeval tv = ToTimeval(options.timeout);
  redisContext* c =
      redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, tv);
  if (c == nullptr) {
    return MakeError(ErrorCode::kResourceExhausted,
                     display + ": cannot allocate a connection");
  }
  if (c->err != 0) {
    std::string why = c->errstr;
    redisFree(c);
    return MakeError(ErrorCode::kUnavailable, display + ": cannot connect to " +
                                                  endpoint.Name() + ": " + why);
  }
  std::unique_ptr<Connection> conn(new Connection(c, display));
  if (redisSetTimeout(c, tv) != REDIS_OK ||
      redisEnableKeepAlive(c) != REDIS_OK) {
    return MakeError(ErrorCode::kUnavailable,
                     display + ": cannot set up the connection to " +
                         endpoint.Name() + ": " + c->errstr);
  }
  std::vector<Command> setup;
  if (!options.password.empty()) {
    if (options.user.empty()) {
      setup.push_back({"AUTH", options.password});
    } else {
      setup.push_back({"AUTH", options.user, options.password});
    }
  }
  const std::string db = std::to_string(options.db);
  if (options.db != 0) setup.push_back({"SELECT", db});
  if (setup.empty()) return conn;
  IDEM_ASSIGN_OR_RETURN(auto replies, conn->Run(setup));
  for (const Reply& r : replies) {
    if (r->type == REDIS_REPLY_ERROR) {
      Error e = ReplyError(
          *r, display + ": connection setup on " + endpoint.Name() +
                  (IsAuthError(r.get())
                       ? ": authentication refused (check the URI's user "
                         "and password)"
                       : ""));
      // AUTH and SELECT refusals are configuration errors, not outages.
      return tl::unexpected(e.code() == ErrorCode::kUnavailable
                                ? e
                                : Error(ErrorCode::kInternal, e.message()));
    }
  }
  return conn;
}

Connection::~Connection() { redisFree(context_); }

Result<std::vector<Reply>> Connection::Run(std::span<const Command> commands) {
  std::vector<Reply> replies;
  if (broken_) {
    return MakeError(ErrorCode::kUnavailable, display_ + ": connection lost");
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> argvlen;
  for (const Command& command : commands) {
    argv.clear();
    argvlen.clear();
    for (std::string_view arg : command) {
      argv.push_back(arg.data());
      argvlen.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context_, static_cast<int>(argv.size()),
                               argv.data(), argvlen.data()) != REDIS_OK) {
      broken_ = true;
      return MakeError(ErrorCode::kUnavailable,
                       display_ + ": " + context_->errstr);
    }
  }
  replies.reserve(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      broken_ = true;
      // A timeout shows as EAGAIN.
      const std::string why = context_->err == REDIS_ERR_IO &&
                                      (errno == EAGAIN || errno == EWOULDBLOCK)
                                  ? "timed out"
                                  : context_->errstr;
      return MakeError(ErrorCode::kUnavailable, display_ + ": " + why);
    }
    replies.emplace_back(static_cast<redisReply*>(raw));
  }
  return replies;
}

bool Connection::Reusable(SteadyClock::time_point now) const {
  if (broken_ || context_->err != 0) return false;
  if (now - returned_at_ < std::chrono::milliseconds(20)) return true;
  pollfd p{.fd = context_->fd, .events = POLLIN, .revents = 0};
  int n;
  do {
    n = ::poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  return n == 0;
}

Pool::Pool(Endpoint endpoint, ConnectOptions options, std::size_t max_size,
           std::chrono::milliseconds acquire_timeout, std::string display)
    : endpoint_(std::move(endpoint)),
      options_(std::move(options)),
      max_size_(max_size),
      acquire_timeout_(acquire_timeout),
      display_(std::move(display)) {}

Pool::~Pool() = default;

Result<Pool::Lease> Pool::Acquire() {
  const auto now = SteadyClock::now();
  std::unique_lock<std::mutex> lock(mu_);
  if (!freed_.wait_until(lock, now + acquire_timeout_,
                         [&] { return !idle_.empty() || open_ < max_size_; })) {
    return MakeError(ErrorCode::kUnavailable,
                     display_ + ": no free connection to " + endpoint_.Name() +
                         " within " + std::to_string(acquire_timeout_.count()) +
                         " ms");
  }
  std::unique_ptr<Connection> stale;
  if (!idle_.empty()) {
    std::unique_ptr<Connection> conn = std::move(idle_.back());
    idle_.pop_back();
    if (conn->Reusable(now)) return Lease(this, std::move(conn));
    stale = std::move(conn);  // Replaced below; closed outside the lock.
  } else {
    ++open_;
  }
  lock.unlock();
  stale.reset();
  auto conn = Connection::Open(endpoint_, options_, display_);
  if (!conn) {
    lock.lock();
    --open_;
    lock.unlock();
    freed_.notify_one();
    return tl::unexpected(conn.error());
  }
  return Lease(this, std::move(*conn));
}

void Pool::GiveBack(std::unique_ptr<Connection> connection) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (connection->broken()) {
      --open_;
    } else {
      connection->MarkReturned(SteadyClock::now());
      idle_.push_back(std::move(connection));
    }
  }
  freed_.notify_one();
  // A broken connection is closed here, outside the lock.
}

Result<std::vector<Reply>> Pool::Run(std::span<const Command> commands,
                                     int resends) {
  bool role_resent = false;
  for (int attempt = 0;;) {
    IDEM_ASSIGN_OR_RETURN(Lease lease, Acquire());
    auto replies = lease->Run(commands);
    if (replies && IsRoleError(replies->front().get())) {
      // Not reused: a fresh connection may reach the new master.
      lease->MarkBroken();
      if (std::exchange(role_resent, true)) return replies;
      continue;
    }
    if (replies || !lease->broken() || attempt++ >= resends) return replies;
  }
}

}  // namespace idem::redis
