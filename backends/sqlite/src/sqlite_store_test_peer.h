// Tests' access to what SqliteStore keeps private: not part of the public
// API (tests add this directory to their include path).
//
// Thread-safety: as the store's own calls; set hooks before any claim runs.

#ifndef IDEM_SQLITE_STORE_TEST_PEER_H_
#define IDEM_SQLITE_STORE_TEST_PEER_H_

#include <cstddef>

#include "idem/internal/claim_attempt_hook.h"
#include "idem/sqlite_store.h"

namespace idem {

class SqliteStoreTestPeer {
 public:
  // Called inside Claim, on the thread that runs the write, at each
  // ClaimAttemptPoint (idem/internal/claim_attempt_hook.h). Between the points
  // no transaction is open in autocommit mode, so the hook may change the row
  // through a connection of its own. nullptr clears it.
  static void SetClaimAttemptHook(SqliteStore& store, ClaimAttemptHook hook);
  // How many writes wait for the writer right now (one waiting behind a
  // SqliteTransaction on the writer, say).
  static std::size_t QueuedWrites(SqliteStore& store);
};

}  // namespace idem

#endif  // IDEM_SQLITE_STORE_TEST_PEER_H_
