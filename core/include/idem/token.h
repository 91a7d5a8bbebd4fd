// Fencing tokens for claims.
//
// Thread-safety: NewToken may be called from any thread, and in a process
// forked from one that already drew tokens.

#ifndef IDEM_TOKEN_H_
#define IDEM_TOKEN_H_

#include "idem/types.h"

namespace idem {

// 128 bits from the kernel's CSPRNG (getrandom(2)), read a page at a time
// into a per-thread buffer that the kernel wipes in a forked child
// (MADV_WIPEONFORK), so a parent and the workers it forked never draw the
// same token. That matters when they share one store (pre-forked workers on
// one SQLite file): a repeated token would let one process complete or
// release another's claim. Aborts only if the kernel refuses randomness.
Token NewToken();

}  // namespace idem

#endif  // IDEM_TOKEN_H_
