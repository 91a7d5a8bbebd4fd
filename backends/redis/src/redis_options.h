// The ranges of RedisStoreOptions (redis_store.h), checked once by Open for
// both ways in (options and URIs); defined in redis_store_uri.cc beside the
// URI parser.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_OPTIONS_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_OPTIONS_H_

#include "idem/error.h"
#include "idem/redis_store_options.h"

namespace idem::redis {

// Errors: kInvalidArgument naming the first option out of range (no
// server, a port, a prefix with a brace or too long, pool, timeouts, wait,
// a database other than 0 on a cluster).
Status ValidateOptions(const RedisStoreOptions& options);

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_OPTIONS_H_
