// Tests' and idem-bench's access to what RedisStore keeps private: not part
// of the public API (tests add this directory to their include path; a
// backend's BENCH_SOURCES have it too).
//
// Thread-safety: set the hook before any call; SetIfAbsent as the store's
// own calls.

#ifndef IDEM_REDIS_STORE_TEST_PEER_H_
#define IDEM_REDIS_STORE_TEST_PEER_H_

#include <chrono>
#include <functional>
#include <string_view>

#include "idem/error.h"
#include "idem/redis_store.h"

namespace idem {

class RedisStoreTestPeer {
 public:
  // Called before each script that would replace a record in a claim's way
  // (expired, or its lock timed out), with the attempt number (0-based), so
  // that a test can change the record in between as another process would.
  // nullptr clears it.
  static void SetReclaimHook(RedisStore& store,
                             std::function<void(int attempt)> hook);

  // The raw engine operation a claim is measured against (idem-bench):
  // `SET key value NX PX ttl` on the pooled connections of the server
  // holding `key`, one round trip. Returns whether the key was set.
  // Errors as for Claim. It bypasses the records: benchmarks only.
  static Result<bool> SetIfAbsent(RedisStore& store, std::string_view key,
                                  std::string_view value,
                                  std::chrono::milliseconds ttl);
};

}  // namespace idem

#endif  // IDEM_REDIS_STORE_TEST_PEER_H_
