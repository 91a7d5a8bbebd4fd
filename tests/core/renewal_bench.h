// What the lock-renewal tests (renewal_test.cc, renewal_outage_test.cc)
// run on: a Guard over a RenewalTestStore (a store whose renewals can fail
// on command) on a ManualClock, with a RenewalCounter observing it, and
// the POST /orders request they send.

#ifndef IDEM_TESTS_CORE_RENEWAL_BENCH_H_
#define IDEM_TESTS_CORE_RENEWAL_BENCH_H_

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "support/renewal_counter.h"
#include "support/renewal_test_store.h"

namespace idem::testing {

struct RenewalBench {
  // A fresh clock, store, counter and Guard with `options`; with `log`,
  // every message goes to it (no rate limit). Errors: Guard::Create's
  // (`guard` is then null).
  Status Rebuild(GuardOptions options, LogSink log = {}) {
    guard.reset();
    clock = std::make_shared<ManualClock>();
    store = std::make_shared<RenewalTestStore>();
    counter = std::make_shared<RenewalCounter>();
    GuardSetup setup;
    setup.store = store;
    setup.options = std::move(options);
    setup.clock = clock;
    setup.observers.push_back(counter);
    if (log) {
      setup.log_repeat_interval = Duration::zero();
      setup.log = std::move(log);
    }
    IDEM_ASSIGN_OR_RETURN(guard, Guard::Create(std::move(setup)));
    return {};
  }

  // POST /orders with body "{}", the one header `key` (which must outlive
  // the request) and `scope`.
  static RequestView Request(const HeaderView* key,
                             std::optional<std::string_view> scope) {
    RequestView request;
    request.method = "POST";
    request.target = "/orders";
    request.headers = std::span<const HeaderView>(key, 1);
    request.body = "{}";
    request.scope = scope;
    return request;
  }

  Decision Begin(std::string_view key,
                 std::optional<std::string_view> scope = std::nullopt) {
    const HeaderView header[] = {{"Idempotency-Key", key}};
    return guard->Begin(Request(header, scope));
  }

  std::shared_ptr<ManualClock> clock;
  std::shared_ptr<RenewalTestStore> store;
  std::shared_ptr<RenewalCounter> counter;
  std::unique_ptr<Guard> guard;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_CORE_RENEWAL_BENCH_H_
