#include "idem/asio/guard_calls.h"

#include "renewal_timer.h"

#include <string>

#include <boost/asio/this_coro.hpp>

namespace idem::asio {
namespace {

constexpr std::size_t kDefaultStoreThreads = 4;
constexpr std::chrono::milliseconds kDefaultQueueTimeout{5000};

// The store of GuardCalls::unavailable_: every call fails at once with
// kUnavailable, saying why. Never blocks.
class QueueTimeoutStore final : public Store {
 public:
  explicit QueueTimeoutStore(std::chrono::milliseconds timeout)
      : message_(
            "no store-call thread was free within the store-call queue "
            "timeout (" +
            std::to_string(timeout.count()) +
            " ms); the store was not called") {}
  Result<ClaimResult> Claim(const RecordId&, const Fingerprint&, TimePoint,
                            Duration, Duration) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<bool> Complete(const RecordId&, const Token&,
                        const idem::Response&) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<bool> Release(const RecordId&, const Token&) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<bool> Revoke(const RecordId&) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<bool> ExtendLock(const RecordId&, const Token&, TimePoint,
                          Duration) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<std::optional<Record>> Inspect(const RecordId&, TimePoint) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  Result<std::size_t> PurgeExpired(TimePoint, std::size_t) override {
    return MakeError(ErrorCode::kUnavailable, message_);
  }
  StoreInfo Info() const override { return StoreInfo{.name = "unavailable"}; }

 private:
  const std::string message_;
};

}  // namespace

Result<std::unique_ptr<GuardCalls>> GuardCalls::Create(
    std::shared_ptr<Guard> guard, GuardCallOptions options) {
  if (!guard) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "an idem HTTP adapter needs a guard");
  }
  if (options.store_queue_timeout.count() < 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the adapter's store_queue_timeout must not be negative");
  }
  return std::unique_ptr<GuardCalls>(
      new GuardCalls(std::move(guard), std::move(options)));
}

GuardCalls::GuardCalls(std::shared_ptr<Guard> guard, GuardCallOptions options)
    : guard_(std::move(guard)), options_(std::move(options)) {
  // A store that never blocks is called inline: a hop to the pool and back
  // would only add latency.
  const bool pool = options_.store_calls == StoreCalls::kPool ||
                    (options_.store_calls == StoreCalls::kAuto &&
                     guard_->store().Info().calls_may_block);
  if (!pool) return;
  const StoreInfo info = guard_->store().Info();
  std::size_t threads = options_.store_threads;
  if (threads == 0) {
    threads = info.max_concurrent_calls > 0 ? info.max_concurrent_calls
                                            : kDefaultStoreThreads;
  }
  queue_timeout_ = options_.store_queue_timeout;
  if (queue_timeout_.count() == 0) {
    queue_timeout_ = info.acquire_timeout.count() > 0 ? info.acquire_timeout
                                                      : kDefaultQueueTimeout;
  }
  // Claims and completions go to the store's own thread, from the caller's:
  // only the rarer calls (releases, renewals) take the pool.
  async_ = options_.store_calls == StoreCalls::kAuto &&
           guard_->calls_store_asynchronously();
  pool_threads_ = threads;
  pool_ = std::make_unique<net::thread_pool>(threads);
  // Shares the guard's options, metrics and clock (non-owning: guard_
  // outlives it), so its answers are counted where the guard's are.
  GuardSetup setup;
  setup.store = std::make_shared<QueueTimeoutStore>(queue_timeout_);
  setup.options = guard_->options();
  setup.clock =
      std::shared_ptr<Clock>(std::shared_ptr<void>(), &guard_->clock());
  setup.metrics =
      std::shared_ptr<Metrics>(std::shared_ptr<void>(), &guard_->metrics());
  setup.observers = guard_->observers();
  setup.log = options_.log;
  auto unavailable = Guard::Create(std::move(setup));
  // The guard's own options were valid, so these are.
  if (unavailable) unavailable_ = std::move(*unavailable);
}

GuardCalls::~GuardCalls() { JoinPool(); }

void GuardCalls::JoinPool() {
  if (pool_) pool_->join();
  std::unique_lock<std::mutex> lock(in_flight_mu_);
  in_flight_done_.wait(
      lock, [this] { return in_flight_.load(std::memory_order_acquire) == 0; });
}

void GuardCalls::EndInFlight() {
  if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // Under the mutex: JoinPool cannot miss the wake between its check and
  // its wait, nor return (and its caller destroy this) before the
  // notification is done.
  std::lock_guard<std::mutex> lock(in_flight_mu_);
  in_flight_done_.notify_all();
}

net::awaitable<Decision> GuardCalls::Decide(
    const RequestView& request, std::shared_ptr<const GuardOptions> route) {
  // No co_await inside a conditional expression: GCC 12 drops its
  // temporaries wrongly.
  Decision d;
  if (pool_ && options_.store_calls == StoreCalls::kPool && guard_->enabled()) {
    co_await BeginOnPool(request, std::move(route), d);
  } else {
    // Everything up to the claim on this thread, and the claim too when
    // the store never blocks or answers it without blocking (a local
    // cache's hit): only a claim that may block takes the pool (Continue).
    // Switched off (SetEnabled), no store is called, so a busy pool cannot
    // turn a pass-through into a queue-timeout answer.
    d = guard_->BeginWithoutBlocking(request, route);
  }
  if (d.action == Action::kCallStore) co_await ClaimAgain(d);
  if (d.action == Action::kWait) co_await Wait(d);
  co_return d;
}

net::awaitable<Decision> GuardCalls::Continue(Decision d) {
  if (d.action == Action::kCallStore) co_await ClaimAgain(d);
  if (d.action == Action::kWait) co_await Wait(d);
  co_return d;
}

net::awaitable<void> GuardCalls::BeginOnPool(
    const RequestView& request, std::shared_ptr<const GuardOptions> route,
    Decision& d) {
  auto begin = [&] { return guard_->Begin(request, route); };
  std::optional<Decision> begun = co_await OnPool(begin);
  // Not started in time: answered without the store, as step 8.
  if (begun) {
    d = std::move(*begun);
  } else {
    d = unavailable_->Begin(request, route);
  }
}

net::awaitable<void> GuardCalls::Wait(Decision& d) {
  // Polls on a timer: the connection's thread is free while it waits.
  net::steady_timer timer(co_await net::this_coro::executor);
  while (d.action == Action::kWait) {
    timer.expires_after(
        std::chrono::duration_cast<net::steady_timer::duration>(d.retry_in));
    co_await timer.async_wait(net::use_awaitable);
    co_await ClaimAgain(d);
  }
}

net::awaitable<void> GuardCalls::ClaimAgain(Decision& d) {
  if (async_) {
    auto start = [&](std::function<void()> answered) {
      return guard_->StartResume(d, std::move(answered));
    };
    // Answered (or declined: then Resume makes the call itself).
    co_await OnStore(start);
    d = guard_->Resume(std::move(d));
  } else if (pool_) {
    co_await ClaimOnPool(d);
  } else {
    // Without a pool (a store that never blocks) BeginWithoutBlocking never
    // returns kCallStore; a caller's decision from another guard would.
    d = guard_->Resume(std::move(d));
  }
}

net::awaitable<void> GuardCalls::ClaimOnPool(Decision& d) {
  auto claim = [&] { return guard_->Resume(std::move(d)); };
  std::optional<Decision> claimed = co_await OnPool(claim);
  // Not started in time (`d` untouched): answered without the store, as
  // step 8.
  if (claimed) {
    d = std::move(*claimed);
  } else {
    d = unavailable_->Resume(std::move(d));
  }
}

std::shared_ptr<RenewalTimer> GuardCalls::StartRenewal(
    ClaimHandle& claim, net::any_io_executor executor) {
  // With the route's lock_renewal, a timer renews the claim while the
  // handler runs; nothing is scheduled otherwise.
  if (claim.lock_renewal() <= Duration::zero()) return nullptr;
  std::optional<net::any_io_executor> store_calls;
  if (pool_) store_calls = pool_->get_executor();
  return RenewalTimer::Start(std::move(executor), claim.lease(),
                             std::move(store_calls));
}

void GuardCalls::StopRenewal(RenewalTimer* renewal) {
  if (renewal != nullptr) renewal->Stop();
}

net::awaitable<FinishResult> GuardCalls::Finish(ClaimHandle& claim,
                                                const Response& stored) {
  auto finish = [&] { return claim.Finish(stored); };
  if (!pool_) co_return finish();
  if (async_) {
    auto start = [&](std::function<void()> answered) {
      return claim.StartFinish(stored, std::move(answered));
    };
    // Completed by the store's thread: Finish ends the claim with its
    // answer, without another store call. (A release, or a claim that
    // needs none, is Finish's on the pool, below.)
    if (co_await OnStore(start)) co_return finish();
  }
  if (std::optional<FinishResult> done = co_await OnPool(finish)) {
    co_return *done;
  }
  claim.Forget(
      "storing the response was not started within the store-call queue "
      "timeout (" +
      std::to_string(queue_timeout_.count()) + " ms); sent unstored");
  co_return FinishResult::kStoreFailed;
}

net::awaitable<void> GuardCalls::Abandon(ClaimHandle& claim) {
  // Released here rather than by the ClaimHandle's destructor so that the
  // store call happens off the I/O thread.
  auto abandon = [&] {
    claim.Abandon();
    return true;
  };
  if (!pool_) {
    abandon();
    co_return;
  }
  if (!co_await OnPool(abandon)) {
    claim.Forget(
        "releasing a key was not started within the store-call queue "
        "timeout (" +
        std::to_string(queue_timeout_.count()) + " ms)");
  }
}

}  // namespace idem::asio
