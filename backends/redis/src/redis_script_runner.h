// Runs the store's scripts and plain commands on the key they touch, and
// turns Redis' answers into the store's errors: EVALSHA, then EVAL with the
// source after NOSCRIPT (a server restarted, failed over or SCRIPT FLUSHed
// forgets scripts), WAIT after a write when replicas are asked for (a
// script or a plain command such as the claim's SET), and an error reply
// as the Error its code maps to (redis_connection.h).
//
// Thread-safety: every method may be called from any thread (the router's
// pools serialise each connection).

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_SCRIPT_RUNNER_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_SCRIPT_RUNNER_H_

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.h"
#include "redis_connection.h"
#include "redis_router.h"
#include "redis_scripts.h"

namespace idem::redis {

class ScriptRunner {
 public:
  // `wait_replicas` 0: never WAIT. `display` prefixes every message.
  ScriptRunner(Router& router, int wait_replicas,
               std::chrono::milliseconds wait_timeout, std::string display);

  // Runs `script` on `key` with `args` as ARGV, then WAIT when `wait` and
  // replicas are asked for. Returns the script's reply. Errors: the
  // script's error reply (ReplyError), the router's errors (kUnavailable),
  // kUnavailable when fewer replicas than asked for acknowledged the
  // write in time (the write itself happened on the master).
  Result<Reply> Run(const Script& script, const std::string& key,
                    std::span<const std::string_view> args, bool wait,
                    int resends);

  // Runs one command on `key`'s server, then WAIT when `wait` and
  // replicas are asked for; resent as Pool::Run says. Errors as Run's.
  Result<Reply> RunCommand(const std::string& key, const Command& command,
                           bool wait = false, int resends = 0);

  // The pieces of Run and RunCommand, for a caller that sends the
  // commands its own way (redis_async_calls.h), so that both paths send
  // and answer alike.
  // Whether a call asked to `wait` is followed by WAIT.
  bool Waits(bool wait) const { return wait && wait_replicas_ > 0; }
  // WAIT replicas timeout (views into this runner).
  Command WaitCommand() const {
    return {"WAIT", wait_replicas_text_, wait_ms_text_};
  }
  // EVALSHA sha1 1 key args...
  static Command ScriptCall(const Script& script, const std::string& key,
                            std::span<const std::string_view> args);
  // The command's reply (replies[0]), or the error its reply or the
  // WAIT's (replies[1], when `waits`) stands for.
  Result<Reply> Answer(std::vector<Reply> replies, bool waits) const;

 private:
  // Sends `command`, followed by WAIT when `waits`, in one pipeline.
  Result<std::vector<Reply>> Send(const std::string& key,
                                  const Command& command, bool waits,
                                  int resends);

  Router& router_;
  const int wait_replicas_;
  const std::string wait_replicas_text_;
  const std::string wait_ms_text_;
  const std::string display_;
};

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_SCRIPT_RUNNER_H_
