// The safety checks RedisStore::Open makes on every server (redis_store.h):
// an eviction policy other than noeviction may evict live records, and so
// silently run a request twice; a server older than Redis 7.0 refuses the
// claim's SET ... NX GET; persistence decides StoreInfo::durable.
//
// Thread-safety: as the router's.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_CHECKS_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_CHECKS_H_

#include <string>

#include "idem/error.h"
#include "idem/log.h"
#include "redis_router.h"

namespace idem::redis {

// The oldest major version of Redis the store runs on.
inline constexpr int kMinMajorVersion = 7;

// Reads maxmemory-policy, appendonly, save and the version (INFO server) of
// every server of `router`. Returns whether every server persists (AOF or
// RDB snapshots); a server whose CONFIG is disabled counts as not
// persisting and gets a warning to `log` (messages start with `prefix`).
// Errors: kInvalidArgument for an evicting policy unless `allow_eviction`,
// or a version before kMinMajorVersion (a version that does not read is
// not checked); what the router reports.
Result<bool> CheckServers(Router& router, bool allow_eviction,
                          const std::string& prefix, const LogSink& log);

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_CHECKS_H_
