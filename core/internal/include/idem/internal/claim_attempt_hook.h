// The test hook of the SQL stores' bounded claim loop (Store::Claim, "Lost
// races"). Not installed: only the SQL backends' sources and their test
// peers (backends/<x>/src/<x>_store_test_peer.h) and tests/support include
// it, through the build-only target idem::core_internal.

#ifndef IDEM_INTERNAL_CLAIM_ATTEMPT_HOOK_H_
#define IDEM_INTERNAL_CLAIM_ATTEMPT_HOOK_H_

#include <functional>

namespace idem {

// Where a claim of a SQL store is in one attempt of its bounded retry loop
// (see Store::Claim): before it writes (inserts or upserts), and after the
// write found a record in the way, before it reads that record.
enum class ClaimAttemptPoint { kBeforeWrite, kBeforeRead };

// A test hook the SQL stores call at those points, with the attempt number
// (0-based), so that a test can make a claim lose its race deterministically
// (delete the row before the read, plant it again before the next write).
// Set only through a store's test peer; never in production.
using ClaimAttemptHook = std::function<void(ClaimAttemptPoint, int attempt)>;

}  // namespace idem

#endif  // IDEM_INTERNAL_CLAIM_ATTEMPT_HOOK_H_
