// See redis_server_checks.h.

#include "redis_server_checks.h"

#include <array>
#include <optional>
#include <string>

#include "redis_connection.h"

namespace idem::redis {

Result<bool> CheckServers(Router& router, bool allow_eviction,
                          const std::string& prefix, const LogSink& log) {
  const Command policy = {"CONFIG", "GET", "maxmemory-policy"};
  const Command aof = {"CONFIG", "GET", "appendonly"};
  const Command save = {"CONFIG", "GET", "save"};
  const std::array<Command, 3> commands = {policy, aof, save};
  bool durable = true;
  for (const std::string& server : router.Servers()) {
    IDEM_ASSIGN_OR_RETURN(auto replies, router.RunOn(server, commands));
    auto value = [&](std::size_t i) -> std::optional<std::string> {
      const redisReply* r = replies[i].get();
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        return std::nullopt;
      }
      return std::string(ReplyText(r->element[1]));
    };
    const auto p = value(0);
    if (!p) {
      if (log) {
        log(LogLevel::kWarning,
            prefix + "cannot read the configuration of " + server +
                " (CONFIG is disabled?): make sure its maxmemory-policy is "
                "noeviction, or live records may be evicted");
      }
      durable = false;
      continue;
    }
    if (*p != "noeviction" && !allow_eviction) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          prefix + "server " + server + " has maxmemory-policy " + *p +
              ", which may evict live records (and so run a request "
              "twice); set it to noeviction, or add allow_eviction=true");
    }
    const auto a = value(1);
    const auto s = value(2);
    durable = durable && ((a && *a == "yes") || (s && !s->empty()));
  }
  return durable;
}

}  // namespace idem::redis
