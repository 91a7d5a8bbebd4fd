// A GuardObserver that counts lock renewals by kind (OnRenewal), for the
// lock-renewal tests that wait for the Guard's renewal thread.
//
// Thread-safety: the counts are atomics, read from any thread.

#ifndef IDEM_TESTS_SUPPORT_RENEWAL_COUNTER_H_
#define IDEM_TESTS_SUPPORT_RENEWAL_COUNTER_H_

#include <atomic>

#include "idem/observer.h"

namespace idem::testing {

class RenewalCounter : public GuardObserver {
 public:
  void OnRenewal(const RenewalEvent& event) override {
    if (event.renewed) ++renewed;
    if (event.lost) ++lost;
    if (event.store_failed) ++store_failed;
  }
  std::atomic<int> renewed{0};
  std::atomic<int> lost{0};
  std::atomic<int> store_failed{0};
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_RENEWAL_COUNTER_H_
