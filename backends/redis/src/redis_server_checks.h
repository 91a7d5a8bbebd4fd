// The safety checks RedisStore::Open makes on every server (redis_store.h):
// an eviction policy other than noeviction may evict live records, and so
// silently run a request twice; persistence decides StoreInfo::durable.
//
// Thread-safety: as the router's.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_CHECKS_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_CHECKS_H_

#include <string>

#include "idem/error.h"
#include "idem/log.h"
#include "redis_router.h"

namespace idem::redis {

// Reads maxmemory-policy, appendonly and save of every server of `router`.
// Returns whether every server persists (AOF or RDB snapshots); a server
// whose CONFIG is disabled counts as not persisting and gets a warning to
// `log` (messages start with `prefix`). Errors: kInvalidArgument for an
// evicting policy unless `allow_eviction`; what the router reports.
Result<bool> CheckServers(Router& router, bool allow_eviction,
                          const std::string& prefix, const LogSink& log);

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_CHECKS_H_
