// Walking the Redis store's keys: a SCAN of a pattern on every server (every
// master of a cluster), and the head of each value it lists, for
// PurgeExpired and Stats.
//
// Thread-safety: plain functions over a Router, which is thread-safe.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_SCAN_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_SCAN_H_

#include <hiredis/hiredis.h>

#include <functional>
#include <string>
#include <string_view>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/store.h"
#include "redis_router.h"

namespace idem::redis {

// SCAN MATCH's pattern for the store's keys under `prefix`:
// <prefix, glob-escaped>{*}.
std::string KeysPattern(std::string_view prefix);

// Calls `visit(server, keys)` with each page of `SCAN 0 MATCH pattern`
// (`keys` the page's array reply) on every server of `router`, until it
// returns false or an error. Errors: the server's, or kInternal for a reply
// that is not a SCAN reply; `display` names the store in them.
Status ScanKeys(Router& router, const std::string& pattern,
                std::string_view display,
                const std::function<Result<bool>(const std::string&,
                                                 const redisReply&)>& visit);

// Calls `visit(key, head)` for every string key under `pattern`, `head`
// the first kHeadSize bytes of its value (redis_record.h; fewer when the
// value is shorter), read with one pipelined GETRANGE per SCAN page on the
// server that listed the page (a key whose slot is moving, answered -ASK
// or -MOVED there, is read again through the router). Keys of other
// types, and keys deleted since the page was listed, are skipped. Stops when
// `visit` returns false or an error. Errors: ScanKeys', or the error a GETRANGE
// reply stands for.
Status ScanHeads(Router& router, const std::string& pattern,
                 std::string_view display,
                 const std::function<Result<bool>(
                     std::string_view key, std::string_view head)>& visit);

// The records under `pattern` counted as of `now` by their heads
// (ScanHeads): expired or not by the expires_at PeekExpiresAt reads, by the
// state byte otherwise; a head that does not peek (short, bad magic or
// version) or an unknown live state is damaged. A record whose body is
// damaged counts by its header. Keys of other types are skipped.
Result<StoreStats> CountRecords(Router& router, const std::string& pattern,
                                std::string_view display, TimePoint now);

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_SCAN_H_
