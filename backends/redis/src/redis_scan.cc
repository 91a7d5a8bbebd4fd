#include "redis_scan.h"

#include <cstddef>
#include <string>
#include <vector>

#include "redis_connection.h"
#include "redis_record.h"

namespace idem::redis {
namespace {

// Keys one SCAN call asks a server for.
constexpr std::size_t kScanCount = 256;

}  // namespace

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

Result<StoreStats> CountRecords(Router& router, const std::string& pattern,
                                std::string_view display, std::int64_t now_us) {
  StoreStats stats;
  IDEM_RETURN_IF_ERROR(ScanKeys(
      router, pattern, display,
      [&](const std::string& server, const redisReply& keys) -> Result<bool> {
        std::vector<Command> reads;
        for (std::size_t i = 0; i < keys.elements; ++i) {
          reads.push_back({"HMGET", ReplyText(keys.element[i]), "s", "e"});
        }
        if (reads.empty()) return true;
        IDEM_ASSIGN_OR_RETURN(auto replies, router.RunOn(server, reads));
        for (const Reply& r : replies) {
          if (IsError(r.get(), "WRONGTYPE")) continue;  // Not a record.
          if (r->type == REDIS_REPLY_ERROR) {
            return tl::unexpected(ReplyError(*r, display));
          }
          if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            return MakeError(
                ErrorCode::kInternal,
                std::string(display) + ": unexpected reply to HMGET");
          }
          CountFields(stats, r->element[0], r->element[1], now_us);
        }
        return true;
      }));
  return stats;
}

}  // namespace idem::redis
