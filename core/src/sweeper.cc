#include "idem/sweeper.h"

#include <optional>
#include <string>
#include <utility>

#include "idem/store/forwarding_store.h"

namespace idem {

Result<std::unique_ptr<Sweeper>> Sweeper::Start(Store& store,
                                                SweeperOptions options) {
  if (options.batch == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "sweeper: batch must be positive");
  }
  if (options.interval < Duration::zero() ||
      options.interval > kMaxSweepInterval) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "sweeper: interval must be from 0 to " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                               kMaxSweepInterval)
                               .count()) +
            " s");
  }
  if (options.max_pass_time < Duration::zero()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "sweeper: max_pass_time must not be negative");
  }
  if (!options.clock) options.clock = SystemClock::Instance();
  std::unique_ptr<Sweeper> sweeper(new Sweeper(store, std::move(options)));
  if (sweeper->options_.interval > Duration::zero()) {
    Sweeper* s = sweeper.get();
    sweeper->thread_ = std::thread([s] { s->Loop(); });
  }
  return sweeper;
}

Sweeper::Sweeper(Store& store, SweeperOptions options)
    : store_(store), options_(std::move(options)) {}

Sweeper::~Sweeper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::size_t> Sweeper::SweepOnce() {
  std::lock_guard<std::mutex> pass(pass_mu_);
  const auto start = std::chrono::steady_clock::now();
  std::size_t purged = 0;
  std::optional<Error> error;
  for (;;) {
    Result<std::size_t> n =
        store_.PurgeExpired(options_.clock->Now(), options_.batch);
    if (!n) {
      error = n.error();
      break;
    }
    purged += *n;
    if (options_.metrics) {
      options_.metrics->Count(CountedEvent::kSweeperPurged, *n);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.batches;
      stats_.purged += *n;
      if (stopping_) break;
    }
    if (*n < options_.batch) break;  // Nothing expired is left.
    if (std::chrono::steady_clock::now() - start >= options_.max_pass_time) {
      break;  // The rest waits for the next pass.
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.passes;
    if (error) ++stats_.errors;
  }
  if (error) {
    if (options_.metrics) options_.metrics->Count(CountedEvent::kSweeperError);
    if (options_.log) {
      options_.log(LogLevel::kWarning,
                   "sweeper: purging expired records of the " +
                       store_.Info().name + " store failed after " +
                       std::to_string(purged) +
                       " deletions; retrying at the next interval: " +
                       error->ToString());
    }
    return tl::unexpected(*error);
  }
  if (purged > 0 && options_.log) {
    options_.log(LogLevel::kInfo, "sweeper: purged " + std::to_string(purged) +
                                      " expired records of the " +
                                      store_.Info().name + " store");
  }
  return purged;
}

SweeperStats Sweeper::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Sweeper::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (cv_.wait_for(lock, options_.interval, [this] { return stopping_; })) {
      break;
    }
    lock.unlock();
    // Failures are counted and logged by SweepOnce; the next pass retries.
    (void)SweepOnce();
    lock.lock();
  }
}

namespace {

// Forwards everything; owns the store and its sweeper, which, a member,
// is destroyed before the store is released: no pass may run once the store
// is gone.
class SweptStore final : public ForwardingStore {
 public:
  explicit SweptStore(std::unique_ptr<Store> inner)
      : ForwardingStore(std::move(inner), ForwardAsync::kYes) {}

  Status Attach(SweeperOptions options) {
    IDEM_ASSIGN_OR_RETURN(sweeper_,
                          Sweeper::Start(inner(), std::move(options)));
    return {};
  }

  Sweeper* sweeper() { return sweeper_.get(); }

 private:
  std::unique_ptr<Sweeper> sweeper_;
};

}  // namespace

Result<std::unique_ptr<Store>> WithSweeper(std::unique_ptr<Store> store,
                                           SweeperOptions options) {
  if (options.interval == Duration::zero()) return store;
  auto swept = std::make_unique<SweptStore>(std::move(store));
  IDEM_RETURN_IF_ERROR(swept->Attach(std::move(options)));
  return std::unique_ptr<Store>(std::move(swept));
}

}  // namespace idem

namespace idem {

Sweeper* FindSweeper(Store& store) {
  auto* swept = dynamic_cast<SweptStore*>(&store);
  return swept == nullptr ? nullptr : swept->sweeper();
}

}  // namespace idem
