// GuardSetup: everything Guard::Create (guard.h) takes, including the state
// the global switch starts in.
//
// Thread-safety: a plain value; Guard::Create consumes it.

#ifndef IDEM_GUARD_SETUP_H_
#define IDEM_GUARD_SETUP_H_

#include <chrono>
#include <memory>
#include <vector>

#include "idem/clock.h"
#include "idem/guard_options.h"
#include "idem/log.h"
#include "idem/metrics.h"
#include "idem/observer.h"
#include "idem/store.h"

namespace idem {

// Everything a Guard needs. Only `store` is required.
struct GuardSetup {
  std::shared_ptr<Store> store;
  // The defaults for every route; a route may pass its own copy to Begin.
  GuardOptions options;
  // Default: SystemClock::Instance().
  std::shared_ptr<Clock> clock;
  // Default: a new Metrics owned by the Guard.
  std::shared_ptr<Metrics> metrics;
  // Told of every decision, finish and renewal (observer.h), in this
  // order, on the thread that made the call. Default: none.
  std::vector<std::shared_ptr<GuardObserver>> observers;
  // Default: no logging. Called until the Guard is destroyed (its
  // destructor writes pending repeat counts), so whatever it captures must
  // outlive the Guard.
  LogSink log;
  // Repeated log messages of one kind (log.h, LogRateLimiter) are written
  // once per this interval, with a count; 0 writes every message. Default:
  // 10 s.
  Duration log_repeat_interval = std::chrono::seconds(10);
  // The state the global switch (Guard::SetEnabled, SEMANTICS.md step 0)
  // starts in. false: a deployment that rolls idem out with protection off
  // (every request passes through unprotected, counted `unprotected`, the
  // store not called) and switches it on at run time with SetEnabled(true).
  // Starting off logs the same warning as switching off. Default: true (on).
  bool enabled = true;
};

}  // namespace idem

#endif  // IDEM_GUARD_SETUP_H_
