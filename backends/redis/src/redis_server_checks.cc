// See redis_server_checks.h.

#include "redis_server_checks.h"

#include <array>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

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

Result<ServerReport> CheckServers(Router& router, bool allow_eviction,
                                  const std::string& prefix) {
  const Command policy = {"CONFIG", "GET", "maxmemory-policy"};
  const Command aof = {"CONFIG", "GET", "appendonly"};
  const Command save = {"CONFIG", "GET", "save"};
  const Command info = {"INFO", "server"};
  const std::array<Command, 4> commands = {policy, aof, save, info};
  ServerReport report;
  // A server out of reach does not hide a refusal of another.
  std::optional<Error> unreachable;
  for (const std::string& server : router.Servers()) {
    auto ran = router.RunOn(server, commands);
    if (!ran) {
      if (ran.error().code() != ErrorCode::kUnavailable) {
        return tl::unexpected(ran.error());
      }
      if (!unreachable) unreachable = ran.error();
      continue;
    }
    const std::vector<Reply>& replies = *ran;
    // Without AUTH every command is refused, CONFIG included: that is no
    // disabled CONFIG but a URI that lacks the password.
    for (const Reply& r : replies) {
      if (IsAuthError(r.get())) {
        return MakeError(ErrorCode::kInternal,
                         prefix + "server " + server +
                             " requires authentication (" +
                             std::string(ReplyText(r.get())) +
                             "): give the user and password in the URI "
                             "(redis://user:password@host:port/db)");
      }
    }
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
      report.warnings.push_back(
          prefix + "cannot read the configuration of " + server +
          " (CONFIG is disabled?): make sure its maxmemory-policy is "
          "noeviction, or live records may be evicted");
      report.durable = false;
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
    if ((a && *a == "yes") || (s && !s->empty())) continue;
    report.durable = false;
    report.warnings.push_back(
        prefix + "server " + server +
        " persists nothing (appendonly no, no RDB save points): a restart "
        "of it forgets every record, and their keys run again");
  }
  if (unreachable) return tl::unexpected(*unreachable);
  return report;
}

}  // namespace idem::redis
