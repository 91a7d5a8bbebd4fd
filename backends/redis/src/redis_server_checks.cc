// See redis_server_checks.h.

#include "redis_server_checks.h"

#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "redis_connection.h"

namespace idem::redis {
namespace {

// The major version in the reply to INFO server ("redis_version:7.0.15"),
// or nullopt when it does not read.
std::optional<int> MajorVersion(const redisReply* info) {
  constexpr std::string_view kField = "redis_version:";
  const std::string_view text = ReplyText(info);
  const std::size_t at = text.find(kField);
  if (info->type != REDIS_REPLY_STRING || at == std::string_view::npos) {
    return std::nullopt;
  }
  int major = 0;
  const char* begin = text.data() + at + kField.size();
  const auto [end, ec] =
      std::from_chars(begin, text.data() + text.size(), major);
  if (ec != std::errc() || end == begin) return std::nullopt;
  return major;
}

}  // namespace

Result<bool> CheckServers(Router& router, bool allow_eviction,
                          const std::string& prefix, const LogSink& log) {
  const Command policy = {"CONFIG", "GET", "maxmemory-policy"};
  const Command aof = {"CONFIG", "GET", "appendonly"};
  const Command save = {"CONFIG", "GET", "save"};
  const Command info = {"INFO", "server"};
  const std::array<Command, 4> commands = {policy, aof, save, info};
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
    // A claim is SET ... NX GET, which older servers refuse at every call.
    const std::optional<int> major = MajorVersion(replies[3].get());
    if (major && *major < kMinMajorVersion) {
      return MakeError(ErrorCode::kInvalidArgument,
                       prefix + "server " + server + " runs Redis " +
                           std::to_string(*major) + ".x; the store needs " +
                           std::to_string(kMinMajorVersion) +
                           ".0 or later (SET with NX and GET)");
    }
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
