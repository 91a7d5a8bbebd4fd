#include "renewal.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "idem/guard.h"

namespace idem {

// ---------------------------------------------------------------------------
// ClaimLease

ClaimLease::ClaimLease(Guard& guard, const RecordId& id, const Token& token,
                       Duration lock_timeout, Duration interval,
                       Duration retry_interval, TimePoint locked_until)
    : guard_(guard),
      id_(id),
      token_(token),
      lock_timeout_(lock_timeout),
      interval_(interval),
      retry_interval_(std::min(retry_interval, interval)),
      held_until_(locked_until.time_since_epoch().count()) {}

LockState ClaimLease::State() const {
  if (ended()) return LockState::kEnded;
  if (lost_.load(std::memory_order_acquire)) return LockState::kLost;
  if (failing_.load(std::memory_order_acquire)) return LockState::kMayBeLost;
  const TimePoint held_until(
      Duration(held_until_.load(std::memory_order_acquire)));
  return guard_.clock().Now() < held_until ? LockState::kHeld
                                           : LockState::kMayBeLost;
}

RenewResult ClaimLease::Renew() {
  if (ended()) return RenewResult::kEnded;
  if (lost_.load(std::memory_order_acquire)) return RenewResult::kLost;
  const TimePoint now = guard_.clock().Now();
  const auto start = std::chrono::steady_clock::now();
  guard_.metrics().Count(CountedEvent::kRenewal);
  Result<bool> extended =
      guard_.store().ExtendLock(id_, token_, now, lock_timeout_);
  RenewalEvent event;
  event.record_id = id_;
  event.store_latency = std::chrono::steady_clock::now() - start;
  // Finish (or Abandon, Forget) ended the lease while the call ran: a false
  // is the completed or released record, not a lost claim, and a renewal
  // after the end is no news to anyone.
  if (ended()) return RenewResult::kEnded;
  const std::string record = ", record " + id_.ToHex();
  RenewResult result;
  if (!extended) {
    // The lock may still hold (it was renewed before, or lock_timeout has not
    // passed); the claim is kept and tried again after retry_interval. Only
    // the first failure of a spell is logged: the retries would write one
    // line every retry_interval for every running handler.
    event.store_failed = true;
    result = RenewResult::kStoreFailed;
    guard_.metrics().Count(CountedEvent::kRenewalFailed);
    if (!failing_.exchange(true, std::memory_order_acq_rel)) {
      detail::GuardRenewal::Log(
          guard_, LogLevel::kError,
          "renewing a lock failed (" + extended.error().ToString() +
              "); the claim is kept, its lock may be lost, and it is "
              "renewed again every " +
              std::to_string(
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      retry_interval_)
                      .count()) +
              " ms until the store answers" + record);
    }
  } else if (*extended) {
    event.renewed = true;
    result = RenewResult::kRenewed;
    // ExtendLock set locked_until to at least now + lock_timeout.
    held_until_.store((now + lock_timeout_).time_since_epoch().count(),
                      std::memory_order_release);
    if (failing_.exchange(false, std::memory_order_acq_rel)) {
      detail::GuardRenewal::Log(guard_, LogLevel::kInfo,
                                "renewing a lock succeeded again after a "
                                "failure; nobody took the key over" +
                                    record);
    }
  } else {
    event.lost = true;
    result = RenewResult::kLost;
    lost_.store(true, std::memory_order_release);
    guard_.metrics().Count(Outcome::kRenewalLost);
    detail::GuardRenewal::Log(
        guard_, LogLevel::kWarning,
        "lock renewal found the claim lost (the lock timed out and another "
        "request took the key over, or the record was revoked); the "
        "handler's response will not be stored" +
            record);
  }
  detail::GuardRenewal::Notify(guard_, event);
  return result;
}

std::shared_ptr<ClaimLease> ClaimHandle::lease() {
  if (lock_renewal() <= Duration::zero()) return nullptr;
  if (!lease_) {
    lease_ = std::make_shared<ClaimLease>(
        *guard_, id_, token_, options_->lock_timeout, options_->lock_renewal,
        options_->lock_renewal_retry, locked_until_);
  }
  return lease_;
}

namespace detail {

// ---------------------------------------------------------------------------
// RenewWhileRunning

RenewWhileRunning::RenewWhileRunning(Guard& guard, ClaimHandle& claim) {
  // The common case, renewal off: not even the lease is made.
  if (claim.lock_renewal() <= Duration::zero()) return;
  renewer_ = &GuardRenewal::RenewerOf(guard);
  ticket_ = renewer_->Add(claim.lease());
}

RenewWhileRunning::~RenewWhileRunning() {
  if (renewer_ != nullptr) renewer_->Remove(ticket_);
}

// ---------------------------------------------------------------------------
// Renewer

Renewer& GuardRenewal::RenewerOf(Guard& guard) {
  std::call_once(guard.renewer_once_, [&] {
    guard.renewer_ = std::make_shared<Renewer>(guard.clock());
  });
  return *guard.renewer_;
}

Renewer::Renewer(Clock& clock)
    : clock_(clock), waiter_(clock.NewWaiter()), thread_([this] { Loop(); }) {}

Renewer::~Renewer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  waiter_->Wake();
  thread_.join();
}

std::uint64_t Renewer::Add(std::shared_ptr<ClaimLease> lease) {
  std::uint64_t ticket;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = next_ticket_++;
    const TimePoint due = clock_.Now() + lease->interval();
    entries_.emplace(ticket, Entry{std::move(lease), due});
    // Only a lease due before the time the thread waits for needs it awake:
    // with one interval for every route that is the first lease after an
    // idle spell, not one wake-up per request.
    wake = due < waiting_until_;
    if (wake) waiting_until_ = due;
  }
  if (wake) waiter_->Wake();
  return ticket;
}

void Renewer::Remove(std::uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  // A renewal of it in flight ends on its own: the lease is ended by then
  // (Finish, Abandon) or its result is ignored.
  entries_.erase(ticket);
}

void Renewer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const TimePoint now = clock_.Now();
    // Linear: one entry per handler running under Run or RunOnce right now.
    auto next = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (next == entries_.end() || it->second.due < next->second.due) {
        next = it;
      }
    }
    if (next != entries_.end() && next->second.due <= now) {
      const std::uint64_t ticket = next->first;
      std::shared_ptr<ClaimLease> lease = next->second.lease;
      // The next renewal is one interval after this one starts, so a slow
      // store call does not push the lock closer to its timeout.
      next->second.due = now + lease->interval();
      lock.unlock();
      const RenewResult result = lease->Renew();
      lock.lock();
      if (result == RenewResult::kLost || result == RenewResult::kEnded) {
        entries_.erase(ticket);
      } else if (auto it = entries_.find(ticket); it != entries_.end()) {
        // A failed renewal is tried again soon (DelayAfter), counted from
        // this one's start: a call that timed out is retried at once.
        it->second.due = now + lease->DelayAfter(result);
      }
      continue;
    }
    waiting_until_ =
        next != entries_.end() ? next->second.due : TimePoint::max();
    const TimePoint deadline = waiting_until_;
    lock.unlock();
    waiter_->WaitUntil(deadline);
    lock.lock();
    // Awake: an Add must not count on the wait above any more.
    waiting_until_ = TimePoint::min();
  }
}

}  // namespace detail
}  // namespace idem
