// The hiredis side of AsyncLoop (redis_async_loop.h): connecting, the
// event hooks that make our poll(2) loop an adapter (hiredis' own
// adapters are for event libraries the store does not use), and the
// callbacks. The hiredis 0.14 facts this relies on:
//  - a context's commands may be queued before it is connected;
//  - redisAsyncHandleRead/Write may drop the connection (an error, EOF, a
//    failed connect) and free the context inside the call: the cleanup
//    hook tells us (it may run twice for one context, so it only clears);
//  - redisAsyncFree, outside a callback, calls every pending command's
//    callback with a NULL reply, then frees the context;
//  - a reply passed to a callback is freed when the callback returns, so
//    the replies a request keeps are copied.

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "redis_async_loop.h"

namespace idem::redis {
namespace {

// A copy of `from` that freeReplyObject frees; nullptr when out of memory.
redisReply* CopyReply(const redisReply* from) {
  auto* r = static_cast<redisReply*>(std::calloc(1, sizeof(redisReply)));
  if (r == nullptr) return nullptr;
  r->type = from->type;
  r->integer = from->integer;
  if (from->str != nullptr) {
    r->str = static_cast<char*>(std::malloc(from->len + 1));
    if (r->str == nullptr) {
      freeReplyObject(r);
      return nullptr;
    }
    std::memcpy(r->str, from->str, from->len);
    r->str[from->len] = '\0';
    r->len = from->len;
  }
  if (from->element != nullptr && from->elements > 0) {
    r->element = static_cast<redisReply**>(
        std::calloc(from->elements, sizeof(redisReply*)));
    if (r->element == nullptr) {
      freeReplyObject(r);
      return nullptr;
    }
    r->elements = from->elements;
    for (std::size_t i = 0; i < from->elements; ++i) {
      r->element[i] = CopyReply(from->element[i]);
      if (r->element[i] == nullptr) {
        freeReplyObject(r);
        return nullptr;
      }
    }
  }
  return r;
}

}  // namespace

void AsyncLoop::Connect() {
  redisAsyncContext* ac =
      redisAsyncConnect(endpoint_.host.c_str(), endpoint_.port);
  if (ac == nullptr) {
    FailWaiting(Error(ErrorCode::kResourceExhausted,
                      display_ + ": cannot allocate a connection"));
    return;
  }
  if (ac->err != 0) {
    Error e(ErrorCode::kUnavailable, display_ + ": cannot connect to " +
                                         endpoint_.Name() + ": " + ac->errstr);
    redisAsyncFree(ac);
    FailWaiting(e);
    return;
  }
  ac->data = this;
  ac->ev.data = this;
  ac->ev.addRead = AddRead;
  ac->ev.delRead = DelRead;
  ac->ev.addWrite = AddWrite;
  ac->ev.delWrite = DelWrite;
  ac->ev.cleanup = Cleanup;
  redisAsyncSetConnectCallback(ac, OnConnect);
  redisEnableKeepAlive(&ac->c);  // As the pooled connections.
  ac_ = ac;
  conn_ = Conn::kConnecting;
  conn_deadline_ = SteadyClock::now() + options_.timeout;
  setup_pending_ = 0;
  want_read_ = false;
  want_write_ = true;  // Writable: the connect finished (or failed).
}

void AsyncLoop::SendSetup() {
  // Connected (OnConnect): AUTH and SELECT before any request.
  std::vector<std::vector<std::string>> setup;
  if (!options_.password.empty()) {
    if (options_.user.empty()) {
      setup.push_back({"AUTH", options_.password});
    } else {
      setup.push_back({"AUTH", options_.user, options_.password});
    }
  }
  if (options_.db != 0)
    setup.push_back({"SELECT", std::to_string(options_.db)});
  for (const auto& command : setup) {
    std::vector<const char*> argv;
    std::vector<std::size_t> argvlen;
    for (const std::string& arg : command) {
      argv.push_back(arg.data());
      argvlen.push_back(arg.size());
    }
    if (redisAsyncCommandArgv(ac_, OnSetupReply, nullptr,
                              static_cast<int>(argv.size()), argv.data(),
                              argvlen.data()) == REDIS_OK) {
      ++setup_pending_;
    }
  }
  if (setup_pending_ == 0) conn_ = Conn::kReady;
}

void AsyncLoop::AddRead(void* data) {
  static_cast<AsyncLoop*>(data)->want_read_ = true;
}
void AsyncLoop::DelRead(void* data) {
  static_cast<AsyncLoop*>(data)->want_read_ = false;
}
void AsyncLoop::AddWrite(void* data) {
  static_cast<AsyncLoop*>(data)->want_write_ = true;
}
void AsyncLoop::DelWrite(void* data) {
  static_cast<AsyncLoop*>(data)->want_write_ = false;
}
void AsyncLoop::Cleanup(void* data) {
  auto* loop = static_cast<AsyncLoop*>(data);
  loop->ac_ = nullptr;
  loop->want_read_ = loop->want_write_ = false;
}

void AsyncLoop::OnConnect(const redisAsyncContext* ac, int status) {
  auto* loop = static_cast<AsyncLoop*>(ac->data);
  if (status != REDIS_OK) {
    // hiredis frees the context next; AfterHiredis fails the waiting.
    loop->conn_error_ =
        Error(ErrorCode::kUnavailable, loop->display_ + ": cannot connect to " +
                                           loop->endpoint_.Name() + ": " +
                                           (ac->errstr ? ac->errstr : "?"));
    return;
  }
  loop->conn_ = Conn::kSetup;  // AfterHiredis sends AUTH and SELECT.
}

void AsyncLoop::OnSetupReply(redisAsyncContext* ac, void* reply,
                             void* /*privdata*/) {
  auto* loop = static_cast<AsyncLoop*>(ac->data);
  const auto* r = static_cast<const redisReply*>(reply);
  if (r == nullptr) return;  // Dropped: AfterHiredis fails the waiting.
  if (r->type == REDIS_REPLY_ERROR && !loop->conn_error_) {
    // As Connection::Open: refusals are configuration errors.
    Error e = ReplyError(
        *r, loop->display_ + ": connection setup on " + loop->endpoint_.Name() +
                (IsAuthError(r) ? ": authentication refused (check the URI's "
                                  "user and password)"
                                : ""));
    loop->conn_error_ = e.code() == ErrorCode::kUnavailable
                            ? e
                            : Error(ErrorCode::kInternal, e.message());
    loop->drop_ = "connection setup refused";
  }
  if (--loop->setup_pending_ == 0 && !loop->conn_error_) {
    loop->conn_ = Conn::kReady;
  }
}

void AsyncLoop::OnReply(redisAsyncContext* ac, void* reply, void* privdata) {
  auto* loop = static_cast<AsyncLoop*>(ac->data);
  auto* r = static_cast<Request*>(privdata);
  const std::size_t index = r->answered++;
  if (reply == nullptr) {
    r->lost = true;
  } else if (!r->lost) {
    r->replies[index].reset(CopyReply(static_cast<redisReply*>(reply)));
    if (r->replies[index] == nullptr) r->lost = true;  // Out of memory.
  }
  if (r->answered < r->commands.size()) return;
  r->in_flight = false;
  if (r->lost) {
    std::string why = loop->drop_.value_or(
        ac->err != 0 && ac->errstr != nullptr ? ac->errstr : "connection lost");
    loop->Lost(r, why);
    return;
  }
  if (!r->role_resent && IsRoleError(r->replies[0].get())) {
    // Not run: sent once more on a new connection, which may reach the
    // new master (as Pool::Run does).
    r->role_resent = true;
    if (!loop->drop_) {
      loop->drop_ = "the server's role changed: " +
                    std::string(ReplyText(r->replies[0].get()));
    }
    loop->waiting_.push_back(r);
    return;
  }
  loop->Finish(r, std::move(r->replies));
}

}  // namespace idem::redis
