#include "renewal_timer.h"

#include <chrono>
#include <utility>

#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

namespace idem::asio {

namespace net = boost::asio;

std::shared_ptr<RenewalTimer> RenewalTimer::Start(
    net::any_io_executor executor, std::shared_ptr<ClaimLease> lease,
    std::optional<net::any_io_executor> store_calls) {
  auto timer = std::make_shared<RenewalTimer>(
      std::move(executor), std::move(lease), std::move(store_calls));
  net::post(timer->strand_, [timer] {
    timer->last_start_ = net::steady_timer::clock_type::now();
    timer->Arm(timer->lease_->interval());
  });
  return timer;
}

RenewalTimer::RenewalTimer(net::any_io_executor executor,
                           std::shared_ptr<ClaimLease> lease,
                           std::optional<net::any_io_executor> store_calls)
    : strand_(net::make_strand(std::move(executor))),
      timer_(strand_),
      lease_(std::move(lease)),
      store_calls_(std::move(store_calls)) {}

void RenewalTimer::Stop() {
  stopped_.store(true);
  // The timer is the strand's to touch; the pending wait holds a reference,
  // so this object lives until the cancelled wait has run.
  net::post(strand_, [self = shared_from_this()] { self->timer_.cancel(); });
}

void RenewalTimer::Arm(Duration delay) {
  if (stopped_.load()) return;
  // From the start of the previous renewal (DelayAfter), so a slow or
  // timed-out store call does not push the next one later.
  timer_.expires_at(
      last_start_ +
      std::chrono::duration_cast<net::steady_timer::duration>(delay));
  timer_.async_wait([self = shared_from_this()](
                        const boost::system::error_code& ec) {
    if (ec || self->stopped_.load()) return;
    self->last_start_ = net::steady_timer::clock_type::now();
    if (!self->store_calls_) {
      // A store that never blocks: renewed right here, as the adapter
      // makes its other calls to it.
      self->Renewed(self->lease_->Renew());
      return;
    }
    // The request's context keeps running until the result is back on its
    // strand (a server that stops waits for it), as with the adapter's
    // other calls on the pool.
    auto home =
        net::prefer(self->strand_, net::execution::outstanding_work.tracked);
    net::post(*self->store_calls_, [self, home] {
      const RenewResult result =
          self->stopped_.load() ? RenewResult::kEnded : self->lease_->Renew();
      net::post(home, [self, result] { self->Renewed(result); });
    });
  });
}

void RenewalTimer::Renewed(RenewResult result) {
  // Lost stays lost and an ended lease renews nothing: stop asking. A store
  // error is tried again after the lease's retry_interval (the lock may
  // still hold, and the first renewal to reach the store when it answers
  // again keeps it).
  if (result == RenewResult::kLost || result == RenewResult::kEnded) return;
  Arm(lease_->DelayAfter(result));
}

}  // namespace idem::asio
