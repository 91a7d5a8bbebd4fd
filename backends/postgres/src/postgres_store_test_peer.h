// Tests' access to what PostgresStore keeps private: not part of the
// public API (tests add this directory to their include path).
//
// Thread-safety: as the store's own calls; set hooks before any claim runs.

#ifndef IDEM_POSTGRES_STORE_TEST_PEER_H_
#define IDEM_POSTGRES_STORE_TEST_PEER_H_

#include <cstddef>
#include <functional>

#include "idem/internal/claim_attempt_hook.h"
#include "idem/postgres_store.h"

namespace idem {

class PostgresStoreTestPeer {
 public:
  // Called inside Claim, on the calling thread, at each ClaimAttemptPoint
  // (idem/internal/claim_attempt_hook.h); every statement before it has
  // committed, so the hook may change the row through a connection of its own.
  // nullptr clears it.
  static void SetClaimAttemptHook(PostgresStore& store, ClaimAttemptHook hook);

  // Runs `call` on the thread of the store's asynchronous calls, after the
  // calls made before it and before those made after it: a call that
  // waits there holds up the thread, so that the calls made meanwhile are
  // sent as one batch once it returns.
  static void PostToAsyncThread(PostgresStore& store,
                                std::function<void()> call);

  // The most batches of asynchronous calls whose results were due at once
  // so far: 2 once a batch went into the pipeline behind another. Waits
  // for the calls made before it.
  static std::size_t DeepestAsyncPipeline(PostgresStore& store);
};

}  // namespace idem

#endif  // IDEM_POSTGRES_STORE_TEST_PEER_H_
