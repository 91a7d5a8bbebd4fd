// RenewalTimer: lock renewal for an Asio adapter (GuardOptions::lock_renewal).
// While a protected handler runs, a timer on the request's executor renews
// its claim (ClaimLease::Renew) every lease->interval(), and a renewal that
// failed again after lease->retry_interval() (ClaimLease::DelayAfter); no
// thread per request, and an adapter makes none when the route's renewal is
// off.
//
// Only Asio and idem's core here, no HTTP library's types: any Asio-based
// adapter can use it.
//
// Thread-safety: Start and Stop from any thread; the timer itself lives on
// a strand of the given executor.

#ifndef IDEM_ASIO_SRC_RENEWAL_TIMER_H_
#define IDEM_ASIO_SRC_RENEWAL_TIMER_H_

#include <atomic>
#include <memory>
#include <optional>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "idem/claim_lease.h"
#include "idem/clock.h"

namespace idem::asio {

class RenewalTimer : public std::enable_shared_from_this<RenewalTimer> {
 public:
  // Renews `lease` every lease->interval() from now until Stop or until a
  // renewal ends (lost, or the lease ended). Each store call runs on
  // `store_calls` when given (a pool for a store whose calls may block), on
  // the timer's strand otherwise; a renewal that gets its result back after
  // Stop schedules nothing more.
  static std::shared_ptr<RenewalTimer> Start(
      boost::asio::any_io_executor executor, std::shared_ptr<ClaimLease> lease,
      std::optional<boost::asio::any_io_executor> store_calls);

  // No renewal starts after this; one already on the store completes
  // (Finish ends the lease, so its result is ignored).
  void Stop();

  RenewalTimer(boost::asio::any_io_executor executor,
               std::shared_ptr<ClaimLease> lease,
               std::optional<boost::asio::any_io_executor> store_calls);

 private:
  // Renews `delay` after the previous renewal started (or Start).
  void Arm(Duration delay);
  void Renewed(RenewResult result);

  boost::asio::strand<boost::asio::any_io_executor> strand_;
  boost::asio::steady_timer timer_;
  const std::shared_ptr<ClaimLease> lease_;
  const std::optional<boost::asio::any_io_executor> store_calls_;
  std::atomic<bool> stopped_{false};
  // When the last renewal started (or Start ran); on the strand only.
  boost::asio::steady_timer::time_point last_start_{};
};

}  // namespace idem::asio

#endif  // IDEM_ASIO_SRC_RENEWAL_TIMER_H_
