// The argument checks of Store::Claim and Store::ExtendLock, the same in
// every store (store.h states when the durations are invalid).
//
// Thread-safety: pure functions.

#ifndef IDEM_STORE_STORE_CHECKS_H_
#define IDEM_STORE_STORE_CHECKS_H_

#include <string_view>

#include "idem/clock.h"
#include "idem/error.h"

namespace idem {

// kInvalidArgument "<prefix>ttl and lock_timeout must be positive" unless
// both are positive. `prefix` names the store and where it is, e.g.
// "sqlite store /var/idem.db: ".
Status CheckClaimDurations(std::string_view prefix, Duration ttl,
                           Duration lock_timeout);

// kInvalidArgument "<prefix>lock_timeout must be positive" unless it is.
Status CheckLockTimeout(std::string_view prefix, Duration lock_timeout);

}  // namespace idem

#endif  // IDEM_STORE_STORE_CHECKS_H_
