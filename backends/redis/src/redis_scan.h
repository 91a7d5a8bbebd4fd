// Walking the Redis store's keys: a SCAN of a pattern on every server (every
// master of a cluster), for PurgeExpired and Stats.
//
// Thread-safety: plain functions over a Router, which is thread-safe.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_SCAN_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_SCAN_H_

#include <hiredis/hiredis.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "idem/error.h"
#include "idem/store.h"
#include "redis_router.h"

namespace idem::redis {

// Calls `visit(server, keys)` with each page of `SCAN 0 MATCH pattern`
// (`keys` the page's array reply) on every server of `router`, until it
// returns false or an error. Errors: the server's, or kInternal for a reply
// that is not a SCAN reply; `display` names the store in them.
Status ScanKeys(Router& router, const std::string& pattern,
                std::string_view display,
                const std::function<Result<bool>(const std::string&,
                                                 const redisReply&)>& visit);

// The records under `pattern` counted by their s and e fields as of
// `now_us` (FloorMicros), one pipelined HMGET per SCAN page on the server
// that listed the keys (CountFields); keys of other types are skipped.
Result<StoreStats> CountRecords(Router& router, const std::string& pattern,
                                std::string_view display, std::int64_t now_us);

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_SCAN_H_
