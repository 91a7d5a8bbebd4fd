// Fencing tokens for claims.
//
// Thread-safety: NewToken may be called from any thread.

#ifndef IDEM_TOKEN_H_
#define IDEM_TOKEN_H_

#include "idem/types.h"

namespace idem {

// 128 bits from a per-thread generator seeded from the OS CSPRNG. Tokens are
// never shown to clients; they only need to differ between claims, so a
// per-thread generator keeps the claim path free of a syscall or a lock.
Token NewToken();

}  // namespace idem

#endif  // IDEM_TOKEN_H_
