// Tests' access to what RedisStore keeps private: not part of the public
// API (tests add this directory to their include path).
//
// Thread-safety: set the hook before any call.

#ifndef IDEM_REDIS_STORE_TEST_PEER_H_
#define IDEM_REDIS_STORE_TEST_PEER_H_

#include <functional>

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
};

}  // namespace idem

#endif  // IDEM_REDIS_STORE_TEST_PEER_H_
