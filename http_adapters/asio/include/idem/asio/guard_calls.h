// GuardCalls: the Guard's decision procedure (guard.h) driven from Asio
// coroutines, for every adapter that runs its calls on Asio (idem::beast,
// idem::restinio, and idem::grpc's callback API). It knows no HTTP
// framework: an adapter turns its request into a RequestView, awaits
// Decide, runs its handler through Execute, turns the handler's response
// into an idem::Response and awaits Finish.
//
//   Decision d = co_await calls.Decide(view, route_options);
//   switch (d.action) { kRespond: send d.response; kPassThrough: run the
//                       handler; kExecute: below }
//   Response r = co_await calls.Execute(d, handler(request));
//   co_await calls.Finish(d.claim, stored_part_of(r));   // before sending
//
// Store calls (Begin, Resume, Finish, the release of a failed handler's key)
// run on a thread pool GuardCalls owns when the store may block
// (StoreInfo::calls_may_block), never on the I/O thread (what precedes the
// claim, and a claim the store answers without blocking, do), and the coroutine
// resumes on its own executor; with a store that never blocks (memory) they
// run inline. A store whose claims and completions are asynchronous
// (StoreInfo::async_calls: SQLite) gets those two from the I/O thread, with
// no pool thread in between (Guard::StartResume, ClaimHandle::StartFinish):
// the coroutine resumes on its executor when the store's thread answers;
// the pool keeps the other calls (releases, renewals). Waiting for an
// in-progress request (lock_wait) is an Asio timer on the caller's executor:
// the I/O thread serves others meanwhile. A store call that no pool thread
// started within the queue timeout is not made: a claim is answered as if the
// store were unreachable (SEMANTICS.md step 8), a Finish or release ends the
// claim with ClaimHandle::Forget.
//
// Thread-safety: every member may be called concurrently from any thread.
// GuardCalls must outlive every coroutine awaiting it; destroying it waits
// for the store calls in flight on its pool.

#ifndef IDEM_ASIO_GUARD_CALLS_H_
#define IDEM_ASIO_GUARD_CALLS_H_

// Boost 1.74's Asio coroutine headers use std::exchange without including
// <utility>; GCC 12's standard library no longer includes it transitively.
#include <utility>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <typeinfo>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "idem/error.h"
#include "idem/guard.h"
#include "idem/log.h"

namespace idem::asio {

namespace net = boost::asio;

class RenewalTimer;  // src/renewal_timer.h

// Where the Guard's store calls run.
enum class StoreCalls {
  kAuto,    // Inline when the store's Info().calls_may_block is false, else
            // the pool, for the calls that may block: a claim the store
            // answers without blocking (Store::TryClaimWithoutBlocking, a
            // local cache's hit) is made inline, with the request's
            // parsing and fingerprint (Guard::BeginWithoutBlocking).
  kInline,  // On the caller's thread (only for stores that never block).
  kPool,    // Always on the pool, the whole of Begin included.
};

struct GuardCallOptions {
  // Threads of the pool that runs store calls; started only when store calls
  // go to the pool. 0: the store's Info().max_concurrent_calls (PostgreSQL:
  // its `pool`), or 4 when the store names none. More threads than the store
  // serves at once would only wait inside the store. Default: 0.
  std::size_t store_threads = 0;
  // How long a store call may wait on the pool's queue before it starts: the
  // deadline of every store call includes its wait in the queue. A claim
  // not started within it is answered as if the store were unreachable
  // (step 8: 503 `idempotency_store_unavailable` on a fail-closed route,
  // unprotected on a fail-open one) without calling the store; a Finish or
  // release not started within it is not made: logged, counted
  // `store_failed`, and the record stays in_progress until its lock
  // timeout. 0: the store's Info().acquire_timeout, or 5 s when the store
  // names none. Default: 0.
  std::chrono::milliseconds store_queue_timeout{0};
  // Where the adapter's own errors go (store calls it could not make in
  // time). Default: none.
  LogSink log;
  // Default: kAuto.
  StoreCalls store_calls = StoreCalls::kAuto;
};

class GuardCalls {
 public:
  // kInvalidArgument when `guard` is missing or the queue timeout negative.
  static Result<std::unique_ptr<GuardCalls>> Create(
      std::shared_ptr<Guard> guard, GuardCallOptions options = {});

  GuardCalls(const GuardCalls&) = delete;
  GuardCalls& operator=(const GuardCalls&) = delete;
  ~GuardCalls();

  // Begin, then Resume after each retry_in on a timer until the wait ends:
  // never returns kWait or kCallStore. `request` must stay valid until it
  // completes.
  net::awaitable<Decision> Decide(const RequestView& request,
                                  std::shared_ptr<const GuardOptions> route);

  // Decide's second half, for a caller that began the decision itself with
  // Guard::BeginWithoutBlocking on a thread that must not block (e.g. a
  // gRPC callback thread): a kCallStore decision is claimed on the pool,
  // a kWait one waits on a timer; anything else is returned as it is.
  // Never returns kWait or kCallStore.
  net::awaitable<Decision> Continue(Decision d);

  // Awaits `handler` under the claim of `d` (action kExecute). With the
  // route's lock_renewal, a timer on the caller's executor renews the claim
  // while `handler` runs (its store calls on the pool when there is one);
  // nothing is scheduled otherwise. When `handler` throws, the key is
  // released (on the pool when there is one) and the exception propagates
  // to the caller, i.e. the server's error handling.
  template <typename R>
  net::awaitable<R> Execute(Decision& d, net::awaitable<R> handler) {
    std::shared_ptr<RenewalTimer> renewal =
        StartRenewal(d.claim, co_await net::this_coro::executor);
    std::exception_ptr error;
    std::optional<R> response;
    try {
      response.emplace(co_await std::move(handler));
    } catch (...) {
      error = std::current_exception();
    }
    StopRenewal(renewal.get());
    if (error) {
      co_await Abandon(d.claim);
      std::rethrow_exception(error);
    }
    co_return std::move(*response);
  }

  // ClaimHandle::Finish(stored), on the pool when there is one. Call it
  // before the response is sent. kStoreFailed when it did not start in time.
  net::awaitable<FinishResult> Finish(ClaimHandle& claim,
                                      const Response& stored);

  // ClaimHandle::Abandon, on the pool when there is one.
  net::awaitable<void> Abandon(ClaimHandle& claim);

  Guard& guard() { return *guard_; }
  // Waits for the store calls in flight, on the pool (none when inline) or
  // asynchronous, and stops the pool. For a server's shutdown: call it
  // after the I/O threads have stopped and before the I/O context is
  // destroyed, because a finished store call posts its completion to the
  // request's executor. No store call may start afterwards.
  void JoinPool();
  // Whether store calls run inline (see StoreCalls).
  bool store_calls_inline() const { return !pool_; }
  // Whether claims and completions are the store's asynchronous calls,
  // started on the caller's thread (see StoreCalls).
  bool store_calls_async() const { return async_; }
  // Whether a caller may begin a decision itself, on a thread that must not
  // block, with Guard::BeginWithoutBlocking and hand it to Continue: false
  // only with StoreCalls::kPool, which puts the whole of Begin on the pool.
  bool begins_without_blocking() const {
    return options_.store_calls != StoreCalls::kPool;
  }
  // Threads of the store-call pool (0 when store calls run inline).
  std::size_t store_threads() const { return pool_ ? pool_threads_ : 0; }
  // The store-call queue timeout in force (0 when store calls run inline).
  std::chrono::milliseconds queue_timeout() const { return queue_timeout_; }

 private:
  GuardCalls(std::shared_ptr<Guard> guard, GuardCallOptions options);

  // Execute's renewal timer (src/renewal_timer.h): null when the claim's
  // route does not renew.
  std::shared_ptr<RenewalTimer> StartRenewal(ClaimHandle& claim,
                                             net::any_io_executor executor);
  static void StopRenewal(RenewalTimer* renewal);

  // Runs `fn` (a store call) on the pool and resumes on the caller's
  // executor with its result, or with nullopt when no pool thread started
  // it within the queue timeout (then `fn` never runs). Callers run `fn`
  // inline instead when there is no pool. One post to the pool and one
  // back, with the coroutine's own handler, and a timer on the caller's
  // executor for the queue deadline: whichever of the pool thread and the
  // timer comes first takes the call. `fn` lives in this frame, which stays
  // suspended until the handler resumes it, and only the pool thread that
  // took the call touches it.
  template <typename Fn>
  net::awaitable<std::optional<std::invoke_result_t<Fn&>>> OnPool(Fn fn) {
    using Value = std::invoke_result_t<Fn&>;
    using Out = std::optional<Value>;
    co_return co_await net::async_initiate<const net::use_awaitable_t<>,
                                           void(std::exception_ptr, Out)>(
        [this, &fn](auto handler) {
          using H = decltype(handler);
          // Keeps the caller's context running until the result is back.
          using Home =
              decltype(net::prefer(net::get_associated_executor(handler),
                                   net::execution::outstanding_work.tracked));
          struct Call {
            Call(H h, net::any_io_executor ex)
                : handler(std::move(h)),
                  home(net::prefer(net::get_associated_executor(handler),
                                   net::execution::outstanding_work.tracked)),
                  timer(std::move(ex)) {}
            std::atomic<bool> taken{false};
            H handler;
            std::optional<Home> home;  // Reset by the timer when it wins.
            net::steady_timer timer;
          };
          net::any_io_executor ex = net::get_associated_executor(handler);
          auto call = std::make_shared<Call>(std::move(handler), std::move(ex));
          call->timer.expires_after(queue_timeout_);
          call->timer.async_wait([call](const boost::system::error_code& ec) {
            if (ec || call->taken.exchange(true)) return;
            Home home = std::move(*call->home);
            call->home.reset();
            net::post(home, [call] {
              std::move(call->handler)(std::exception_ptr(), Out());
            });
          });
          net::post(pool_->get_executor(), [&fn, call]() mutable {
            if (call->taken.exchange(true)) return;  // Timed out in the queue.
            std::exception_ptr error;
            Out result;
            try {
              result.emplace(fn());
            } catch (...) {
              error = std::current_exception();
            }
            Home home = std::move(*call->home);
            // `call` moves into the completion: the last reference, and the
            // timer with it, goes on the caller's context, not on this
            // thread after that context may have been shut down.
            net::post(home, [call = std::move(call), error,
                             result = std::move(result)]() mutable {
              call->timer.cancel();
              std::move(call->handler)(error, std::move(result));
            });
          });
        },
        net::use_awaitable);
  }

  struct StoreRace;  // Below.
  // Starts an asynchronous store call with start(answered), a
  // Guard::StartResume or ClaimHandle::StartFinish, and resumes on the
  // caller's executor once `answered` ran: true. False when `start`
  // declined (returned false; `answered` never runs). A store that answers
  // before `start` returns (a local cache's hit, a RocksDB claim that a
  // record in memory blocks) costs no suspension: the coroutine goes on at
  // once. Otherwise the call counts as in flight (JoinPool) until its
  // completion is posted back; that completion is the last owner of the
  // call's state, so nothing of it is destroyed on the store's thread.
  // Nothing here tracks the caller's context's work: co_spawn's own work
  // guard keeps it running for as long as the coroutine lives, suspended
  // here included.
  template <typename Start>
  net::awaitable<bool> OnStore(Start start) {
    // In the coroutine's frame, which outlives every use of it: the answer
    // touches it only before the coroutine can go on (see StoreRace).
    StoreRace race;
    race.calls = this;
    in_flight_.fetch_add(1, std::memory_order_relaxed);
    // A pointer only (no allocation for the function): the store may keep
    // (and destroy) this function on its own thread afterwards.
    auto answered = [r = &race] {
      if (r->state.exchange(StoreRace::kAnswered, std::memory_order_acq_rel) ==
          StoreRace::kAwaiting) {
        r->Resume();
      }
    };
    bool started = false;
    try {
      started = start(std::function<void()>(answered));
    } catch (...) {
      EndInFlight();  // Never started: JoinPool must not wait for it.
      throw;
    }
    if (!started) {
      EndInFlight();
      co_return false;
    }
    if (race.state.load(std::memory_order_acquire) == StoreRace::kAnswered) {
      EndInFlight();
      co_return true;
    }
    co_return co_await net::async_initiate<const net::use_awaitable_t<>,
                                           void(bool)>(
        [&race](auto handler) {
          auto ex = net::get_associated_executor(handler);
          if constexpr (std::is_same_v<decltype(ex), net::any_io_executor>) {
            if (SuspendAs<IoStrand>(race, handler, ex) ||
                SuspendAs<TrackedIoStrand>(race, handler, ex) ||
                SuspendAs<IoExecutor>(race, handler, ex) ||
                SuspendAs<TrackedIoExecutor>(race, handler, ex)) {
              return;
            }
          }
          Suspend(race, std::move(handler), ex);
        },
        net::use_awaitable);
  }
  // The executors OnStore posts its answers to without their type erasure.
  // An any_io_executor that holds a strand allocates a new copy of it for
  // every prefer and require (a strand does not fit in its own storage),
  // and a post makes two: through the concrete strand, the answer's post
  // from the store's thread allocates only the operation it queues.
  using IoExecutor = net::io_context::executor_type;
  using TrackedIoExecutor = std::decay_t<decltype(net::prefer(
      std::declval<IoExecutor>(), net::execution::outstanding_work.tracked))>;
  using IoStrand = net::strand<IoExecutor>;
  using TrackedIoStrand = net::strand<TrackedIoExecutor>;
  // Suspend with `ex`'s target when it is a `Concrete`: true. False (the
  // handler untouched) otherwise.
  template <typename Concrete, typename H>
  static bool SuspendAs(StoreRace& race, H& handler,
                        const net::any_io_executor& ex) {
    if (ex.target_type() != typeid(Concrete)) return false;
    Suspend(race, std::move(handler), *ex.template target<Concrete>());
    return true;
  }
  // OnStore's suspension: keeps the handler and its home executor for
  // whoever comes second, the answer or the suspension.
  template <typename H, typename Home>
  static void Suspend(StoreRace& race, H handler, const Home& home) {
    struct Call {
      H handler;
      Home home;
    };
    race.call = std::make_shared<Call>(Call{std::move(handler), home});
    // Posts the call's completion home, then ends it in flight: last,
    // since JoinPool may then return and the caller's context go at
    // once, so nothing of the call (its executor included)
    // may be left on this thread by then.
    race.resume = [](GuardCalls& self, std::shared_ptr<void> erased) {
      std::shared_ptr<Call> done =
          std::static_pointer_cast<Call>(std::move(erased));
      {
        Home back = done->home;
        net::post(back,
                  [done = std::move(done)] { std::move(done->handler)(true); });
      }
      self.EndInFlight();
    };
    int expected = StoreRace::kStarting;
    if (!race.state.compare_exchange_strong(expected, StoreRace::kAwaiting,
                                            std::memory_order_acq_rel)) {
      race.Resume();  // Answered since OnStore's check.
    }
  }
  // OnStore's: who came first, the store's answer or the coroutine's
  // suspension. The one that comes second resumes the coroutine; an answer
  // before the suspension began means no suspension at all. Resume reads
  // every field before it posts, since the coroutine (whose frame holds
  // this) may go on and end as soon as it has.
  struct StoreRace {
    static constexpr int kStarting = 0;
    static constexpr int kAnswered = 1;
    static constexpr int kAwaiting = 2;
    std::atomic<int> state{kStarting};
    GuardCalls* calls = nullptr;
    // Set before kAwaiting: the suspended call, type-erased, and what posts
    // its completion home.
    std::shared_ptr<void> call;
    void (*resume)(GuardCalls&, std::shared_ptr<void>) = nullptr;
    void Resume() {
      std::shared_ptr<void> taken = std::move(call);
      resume(*calls, std::move(taken));
    }
  };
  // Decide's and Continue's steps, each on the caller's decision in place.
  // Every coroutine frame above about 1 KiB is a trip through malloc's
  // large-request path (past Asio's reusable block and malloc's per-thread
  // cache, and a consolidation of its free lists each time) on every
  // request: a Decision argument or result is a third of that, so these
  // take it by reference, and the pool's paths, which hold another, are
  // coroutines of their own.
  //
  // The claim of a kCallStore or kWait decision (Guard::Resume): the
  // store's asynchronous call, on the pool, or inline, as the store is.
  net::awaitable<void> ClaimAgain(Decision& d);
  // ClaimAgain's on the pool.
  net::awaitable<void> ClaimOnPool(Decision& d);
  // Waits on a timer and claims again until `d` is no longer kWait.
  net::awaitable<void> Wait(Decision& d);
  // Guard::Begin on the pool (StoreCalls::kPool).
  net::awaitable<void> BeginOnPool(const RequestView& request,
                                   std::shared_ptr<const GuardOptions> route,
                                   Decision& d);
  // One asynchronous call ended (OnStore): wakes JoinPool at the last.
  void EndInFlight();

  std::shared_ptr<Guard> guard_;
  GuardCallOptions options_;
  // Claims and completions through the store's asynchronous calls.
  bool async_ = false;
  std::atomic<std::size_t> in_flight_{0};
  std::mutex in_flight_mu_;
  std::condition_variable in_flight_done_;
  std::unique_ptr<net::thread_pool> pool_;  // Null: store calls inline.
  std::size_t pool_threads_ = 0;
  std::chrono::milliseconds queue_timeout_{0};
  // Answers the requests whose claim did not start in time: the same
  // options, metrics and clock over a store that fails every call at once,
  // so that steps 1-3 and the route's on_store_error apply as they would
  // to an unreachable store.
  std::unique_ptr<Guard> unavailable_;
};

}  // namespace idem::asio

#endif  // IDEM_ASIO_GUARD_CALLS_H_
