#include "redis_script_runner.h"

#include <utility>
#include <vector>

namespace idem::redis {

ScriptRunner::ScriptRunner(Router& router, int wait_replicas,
                           std::chrono::milliseconds wait_timeout,
                           std::string display)
    : router_(router),
      wait_replicas_(wait_replicas),
      wait_replicas_text_(std::to_string(wait_replicas)),
      wait_ms_text_(std::to_string(wait_timeout.count())),
      display_(std::move(display)) {}

Result<Reply> ScriptRunner::Run(const Script& script, const std::string& key,
                                std::span<const std::string_view> args,
                                bool wait, int resends) {
  Command call = ScriptCall(script, key, args);
  const bool waits = Waits(wait);
  IDEM_ASSIGN_OR_RETURN(auto replies, Send(key, call, waits, resends));
  if (IsError(replies[0].get(), "NOSCRIPT")) {
    call[0] = "EVAL";
    call[1] = script.source;
    IDEM_ASSIGN_OR_RETURN(replies, Send(key, call, waits, resends));
  }
  return Answer(std::move(replies), waits);
}

Result<Reply> ScriptRunner::RunCommand(const std::string& key,
                                       const Command& command, bool wait,
                                       int resends) {
  const bool waits = Waits(wait);
  IDEM_ASSIGN_OR_RETURN(auto replies, Send(key, command, waits, resends));
  return Answer(std::move(replies), waits);
}

Command ScriptRunner::ScriptCall(const Script& script, const std::string& key,
                                 std::span<const std::string_view> args) {
  Command call = {"EVALSHA", script.sha1, "1", key};
  call.insert(call.end(), args.begin(), args.end());
  return call;
}

Result<std::vector<Reply>> ScriptRunner::Send(const std::string& key,
                                              const Command& command,
                                              bool waits, int resends) {
  if (!waits) return router_.Run(key, {&command, 1}, resends);
  const Command commands[] = {command, WaitCommand()};
  return router_.Run(key, commands, resends);
}

Result<Reply> ScriptRunner::Answer(std::vector<Reply> replies,
                                   bool waits) const {
  if (replies[0]->type == REDIS_REPLY_ERROR) {
    return tl::unexpected(ReplyError(*replies[0], display_));
  }
  if (waits) {
    const redisReply* w = replies[1].get();
    if (w->type != REDIS_REPLY_INTEGER || w->integer < wait_replicas_) {
      return MakeError(ErrorCode::kUnavailable,
                       display_ + ": the write reached fewer than " +
                           wait_replicas_text_ + " replicas within " +
                           wait_ms_text_ + " ms");
    }
  }
  return std::move(replies[0]);
}

}  // namespace idem::redis
