// The fail-open outage every server store's outage test runs through the
// Guard (tests/backends/<store>/<store>_outage_test.cc): a fail-open Guard
// (FailOpenGuard, guard_client.h) over the store, its server taken down and
// brought back by the test.
//
// Thread-safety: one thread.

#ifndef IDEM_TESTS_SUPPORT_FAIL_OPEN_OUTAGE_H_
#define IDEM_TESTS_SUPPORT_FAIL_OPEN_OUTAGE_H_

#include <functional>

#include "idem/clock.h"
#include "support/guard_client.h"

namespace idem::testing {

// With `client` over `open`'s Guard, fresh (no request sent): a key
// completed before the outage ("before"); while the server is down
// (`stop_server`, which asserts its own success) a failed claim runs the
// handler unprotected within `call_bound`, and within the backoff the store
// is not asked at all, even for a key it holds; after `restart_server` and
// the backoff, a new key ("after") is protected again by the same store and
// replays. Then client.runs is 4 and open.counting->claims 4.
void ExpectFailOpenOutage(FailOpenGuard& open, GuardClient& client,
                          Duration call_bound,
                          const std::function<void()>& stop_server,
                          const std::function<void()>& restart_server);

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_FAIL_OPEN_OUTAGE_H_
