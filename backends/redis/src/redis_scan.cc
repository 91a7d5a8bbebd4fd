#include "redis_scan.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "idem/store/record_codec.h"
#include "redis_connection.h"
#include "redis_record.h"

namespace idem::redis {
namespace {

// Keys one SCAN call asks a server for.
constexpr std::size_t kScanCount = 256;

}  // namespace

std::string KeysPattern(std::string_view prefix) {
  std::string out;
  for (char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out + "{*}";
}

Status ScanKeys(Router& router, const std::string& pattern,
                std::string_view display,
                const std::function<Result<bool>(const std::string&,
                                                 const redisReply&)>& visit) {
  const std::string count = std::to_string(kScanCount);
  for (const std::string& server : router.Servers()) {
    std::string cursor = "0";
    do {
      const Command scan = {"SCAN", cursor, "MATCH", pattern, "COUNT", count};
      IDEM_ASSIGN_OR_RETURN(auto replies, router.RunOn(server, {&scan, 1}));
      const redisReply* r = replies[0].get();
      if (r->type == REDIS_REPLY_ERROR) {
        return tl::unexpected(ReplyError(*r, display));
      }
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
          r->element[1]->type != REDIS_REPLY_ARRAY) {
        return MakeError(ErrorCode::kInternal,
                         std::string(display) + ": unexpected reply to SCAN");
      }
      cursor = std::string(ReplyText(r->element[0]));
      IDEM_ASSIGN_OR_RETURN(const bool more, visit(server, *r->element[1]));
      if (!more) return {};
    } while (cursor != "0");
  }
  return {};
}

Status ScanHeads(Router& router, const std::string& pattern,
                 std::string_view display,
                 const std::function<Result<bool>(
                     std::string_view key, std::string_view head)>& visit) {
  const std::string last = std::to_string(kHeadSize - 1);
  return ScanKeys(
      router, pattern, display,
      [&](const std::string& server, const redisReply& keys) -> Result<bool> {
        std::vector<Command> reads;
        for (std::size_t i = 0; i < keys.elements; ++i) {
          reads.push_back({"GETRANGE", ReplyText(keys.element[i]), "0", last});
        }
        if (reads.empty()) return true;
        IDEM_ASSIGN_OR_RETURN(auto replies, router.RunOn(server, reads));
        for (std::size_t i = 0; i < replies.size(); ++i) {
          // A key in a slot moving between masters (a reshard) is read
          // where the cluster sends it (-ASK, -MOVED).
          if (IsError(replies[i].get(), "MOVED") ||
              IsError(replies[i].get(), "ASK")) {
            IDEM_ASSIGN_OR_RETURN(auto moved,
                                  router.Run(reads[i][1], {&reads[i], 1}, 0));
            replies[i] = std::move(moved[0]);
          }
          const redisReply* r = replies[i].get();
          if (IsError(r, "WRONGTYPE")) continue;  // Not a record.
          if (r->type == REDIS_REPLY_ERROR) {
            return tl::unexpected(ReplyError(*r, display));
          }
          if (r->type != REDIS_REPLY_STRING) {
            return MakeError(
                ErrorCode::kInternal,
                std::string(display) + ": unexpected reply to GETRANGE");
          }
          // A key deleted since the SCAN reads as "" (as an empty value
          // would, which no store writes).
          if (r->len == 0) continue;
          IDEM_ASSIGN_OR_RETURN(const bool more,
                                visit(reads[i][1], ReplyText(r)));
          if (!more) return false;
        }
        return true;
      });
}

Result<StoreStats> CountRecords(Router& router, const std::string& pattern,
                                std::string_view display, TimePoint now) {
  StoreStats stats;
  IDEM_RETURN_IF_ERROR(ScanHeads(
      router, pattern, display,
      [&](std::string_view, std::string_view head) -> Result<bool> {
        const std::optional<TimePoint> expires_at = PeekExpiresAt(head);
        if (!expires_at) {
          ++stats.damaged;
        } else {
          // PeekExpiresAt read the header, so the state is there.
          stats.CountRows(*expires_at <= now,
                          static_cast<std::uint8_t>(head[kStateOffset]), 1);
        }
        return true;
      }));
  return stats;
}

}  // namespace idem::redis
