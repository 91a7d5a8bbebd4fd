// The safety checks the Redis store makes on every server, at the first
// connect and again every check interval (redis_server_watch.h): an
// eviction policy other than noeviction may evict live records, and so
// silently run a request twice; a server older than Redis 7.0 refuses the
// claim's SET ... NX GET; a server that needs a password the URI lacks
// answers -NOAUTH to everything; persistence decides StoreInfo::durable.
//
// Thread-safety: as the router's.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_CHECKS_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_CHECKS_H_

#include <string>
#include <vector>

#include "idem/error.h"
#include "redis_router.h"

namespace idem::redis {

// The oldest major version of Redis the store runs on.
inline constexpr int kMinMajorVersion = 7;

// What the checks found on servers they did not refuse.
struct ServerReport {
  // Every server persists (AOF or RDB snapshots); false when one's
  // configuration could not be read.
  bool durable = true;
  // One line per server whose CONFIG is disabled (its eviction policy is
  // unknown) or that persists nothing (no AOF, no RDB save points: a
  // restart forgets every key), for a warning to the log.
  std::vector<std::string> warnings;
};

// Reads maxmemory-policy, appendonly, save and the version (INFO server) of
// every server of `router` (messages start with `prefix`).
// Errors: kInvalidArgument for an evicting policy unless `allow_eviction`,
// or a version before kMinMajorVersion (a version that does not read is
// not checked); kInternal naming NOAUTH when a server requires a password
// the URI does not give; what the router reports (kUnavailable).
Result<ServerReport> CheckServers(Router& router, bool allow_eviction,
                                  const std::string& prefix);

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_SERVER_CHECKS_H_
