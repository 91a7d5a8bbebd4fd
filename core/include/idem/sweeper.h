// The background sweeper: deletes expired records so that no store grows
// without bound (SEMANTICS.md, "The store operations": every store is swept
// in the background by default).
//
// A Sweeper calls Store::PurgeExpired(clock->Now(), batch) in a loop — a
// pass — until a batch comes back short (nothing expired is left) or the
// pass has run for max_pass_time, then waits `interval` for the next pass.
// A failed batch ends its pass: the error is counted, logged (kWarning) and
// the next pass, one interval later, tries again. Several instances of a
// shared store (SQLite, PostgreSQL) may each run one: PurgeExpired is safe
// alongside claims and other purges (PostgreSQL skips rows another purge or
// claim holds instead of waiting for them).
//
// OpenStore (open_store.h) gives every store it opens a sweeper, per
// StoreOptions::sweep_interval (default 60 s); WithSweeper does the same for
// a store opened otherwise.
//
// Thread-safety: SweepOnce and stats may be called from any thread,
// concurrently with the sweeper's own thread; passes never overlap (a
// SweepOnce waits for a pass in progress). The destructor must not run
// concurrently with SweepOnce.

#ifndef IDEM_SWEEPER_H_
#define IDEM_SWEEPER_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/log.h"
#include "idem/metrics.h"
#include "idem/store.h"

namespace idem {

// The longest interval Start accepts: a longer one is a typo that lets
// records pile up (and would overflow the steady clock's deadline when it
// nears Duration::max()).
inline constexpr Duration kMaxSweepInterval = std::chrono::hours(24);

struct SweeperOptions {
  // Time between the end of one pass and the start of the next; zero starts
  // no thread (SweepOnce still works). From 0 to kMaxSweepInterval.
  // Default: 60 s.
  Duration interval = std::chrono::seconds(60);
  // Records per PurgeExpired call. Small enough that one call holds a
  // backend's write lock briefly (SQLite: one transaction), large enough
  // that a pass over many expired records takes few calls. Must be positive.
  // Default: 1000.
  std::size_t batch = 1000;
  // A pass starts no new batch after running this long (measured on the
  // steady clock), so a store with a huge backlog is cleaned over several
  // intervals instead of one pass that never ends. Zero: one batch per pass.
  // Must not be negative. Default: 1 s.
  Duration max_pass_time = std::chrono::seconds(1);
  // Where `now` for PurgeExpired comes from. Default: SystemClock.
  std::shared_ptr<Clock> clock;
  // Gets one kWarning line per failed pass. Default: nowhere.
  LogSink log;
  // Counts the records each pass deleted (idem_sweeper_purged_records_total)
  // and the passes that failed (idem_sweeper_errors_total), e.g. into the
  // Guard's Metrics so that /metrics shows them. Default: not counted
  // (stats() still has them).
  std::shared_ptr<Metrics> metrics;
};

// What a sweeper did since it started; each field is read separately.
struct SweeperStats {
  std::uint64_t passes = 0;   // Passes finished, failed ones included.
  std::uint64_t batches = 0;  // PurgeExpired calls that succeeded.
  std::uint64_t purged = 0;   // Records those calls deleted.
  std::uint64_t errors = 0;   // Passes that ended on an error.
};

class Sweeper {
 public:
  // Sweeps `store`, which must outlive the sweeper. With a positive
  // interval starts the thread, whose first pass runs one interval from
  // now. Errors: kInvalidArgument for a zero batch, an interval outside
  // 0..kMaxSweepInterval or a negative max_pass_time.
  static Result<std::unique_ptr<Sweeper>> Start(Store& store,
                                                SweeperOptions options);

  // Stops the thread promptly: an idle sweeper wakes at once, a pass in
  // progress stops after its current PurgeExpired call.
  ~Sweeper();

  Sweeper(const Sweeper&) = delete;
  Sweeper& operator=(const Sweeper&) = delete;

  // Runs one pass now, on the calling thread; returns the records it
  // deleted, or the error that ended it (records deleted before the error
  // stay deleted and are counted in stats()).
  Result<std::size_t> SweepOnce();

  SweeperStats stats() const;
  const SweeperOptions& options() const { return options_; }

 private:
  Sweeper(Store& store, SweeperOptions options);
  void Loop();

  Store& store_;
  const SweeperOptions options_;

  std::mutex pass_mu_;  // Held for a whole pass.

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // Guarded by mu_.
  SweeperStats stats_;     // Guarded by mu_.

  std::thread thread_;
};

// `store` with a sweeper of its own, per `options`: the result forwards
// every call to `store` (Info() included), and its destructor stops the
// sweeper before it destroys `store`. A zero interval returns `store`
// itself. Errors: as Sweeper::Start.
Result<std::unique_ptr<Store>> WithSweeper(std::unique_ptr<Store> store,
                                           SweeperOptions options);

// The sweeper of a store WithSweeper (or OpenStore) made, for its stats and
// options; null for any other store. Lives as long as `store`.
Sweeper* FindSweeper(Store& store);

}  // namespace idem

#endif  // IDEM_SWEEPER_H_
