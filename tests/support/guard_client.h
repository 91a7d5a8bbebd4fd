// A client of a Guard for tests that drive it directly (no HTTP): one POST
// /orders per call (PostOrder; GuardClient: in scope "tenant", a handler
// that answers 201 "order" and counts its runs); and the fail-open Guard
// of the outage tests, on a ManualClock, over a store that counts claims.
//
// Thread-safety: one thread at a time.

#ifndef IDEM_TESTS_SUPPORT_GUARD_CLIENT_H_
#define IDEM_TESTS_SUPPORT_GUARD_CLIENT_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/clock.h"
#include "idem/guard.h"
#include "idem/response.h"
#include "support/faulty_store.h"

namespace idem::testing {

// One POST /orders through `guard` with Idempotency-Key `key`, `body`, in
// `scope` (`route`: its per-route options, if any); the handler adds one to
// `runs` and answers `answer` when it runs.
inline idem::Response PostOrder(
    Guard& guard, std::string_view key, std::string_view body,
    std::string_view scope, const idem::Response& answer, int& runs,
    std::shared_ptr<const GuardOptions> route = nullptr) {
  const HeaderView headers[] = {{"Idempotency-Key", key}};
  RequestView request;
  request.method = "POST";
  request.target = "/orders";
  request.headers = headers;
  request.body = body;
  request.scope = scope;
  return guard.Run(
      request,
      [&] {
        ++runs;
        return answer;
      },
      std::move(route));
}

struct GuardClient {
  Guard* guard;
  int runs = 0;  // Handler runs so far.

  idem::Response Send(std::string_view key) {
    return PostOrder(
        *guard, key, "{}", "tenant",
        idem::Response{201, {{"Content-Type", "text/plain"}}, "order"}, runs);
  }
};

// A Guard that fails open with `backoff`, over `store` wrapped to count the
// claims that reach it (counting->claims), on a ManualClock at `t0`.
struct FailOpenGuard {
  std::shared_ptr<FaultyStore> counting;
  std::shared_ptr<ManualClock> clock;
  std::unique_ptr<Guard> guard;  // Null when Guard::Create failed.
  std::string error;

  FailOpenGuard(std::shared_ptr<Store> store, TimePoint t0, Duration backoff)
      : counting(std::make_shared<FaultyStore>(std::move(store))),
        clock(std::make_shared<ManualClock>(t0)) {
    GuardSetup setup;
    setup.store = counting;
    setup.clock = clock;
    setup.options.on_store_error = StoreErrorPolicy::kFailOpen;
    setup.options.store_backoff = backoff;
    auto created = Guard::Create(std::move(setup));
    if (created) {
      guard = std::move(*created);
    } else {
      error = created.error().ToString();
    }
  }
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_GUARD_CLIENT_H_
