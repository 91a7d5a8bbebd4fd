// The Guard's global switch (guard.h, SetEnabled; SEMANTICS.md step 0).

#include "idem/guard.h"

namespace idem {

void Guard::SetEnabled(bool enabled) {
  // Only the call that changes the switch logs, so racing calls write one
  // line. Not rate-limited: an operator must see every change, and changes
  // are operator actions, not per-request events. A Guard created off
  // (GuardSetup::enabled) comes here from its constructor, so that start
  // is logged like a switch off.
  if (enabled_.exchange(enabled, std::memory_order_relaxed) == enabled) return;
  if (!switch_log_) return;
  if (enabled) {
    switch_log_(LogLevel::kInfo,
                "idempotency protection switched on: protected routes "
                "claim their keys");
  } else {
    switch_log_(LogLevel::kWarning,
                "idempotency protection switched off: every protected route "
                "runs unprotected (counted as unprotected) and a retry runs "
                "its handler again, until it is switched on");
  }
}

}  // namespace idem
