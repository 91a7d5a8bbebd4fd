// DownStore: a Store whose every call fails with kUnavailable, as one whose
// server cannot be reached does; for the store-error paths of the Guard's
// callers (fail-closed 503, fail-open). Thread-safe (it has no state).

#ifndef IDEM_TESTS_SUPPORT_DOWN_STORE_H_
#define IDEM_TESTS_SUPPORT_DOWN_STORE_H_

#include <cstddef>
#include <optional>

#include "idem/error.h"
#include "idem/response.h"
#include "idem/store.h"

namespace idem::testing {

class DownStore final : public Store {
 public:
  Result<ClaimResult> Claim(const RecordId&, const Fingerprint&, TimePoint,
                            Duration, Duration) override {
    return Down();
  }
  Result<bool> Complete(const RecordId&, const Token&,
                        const idem::Response&) override {
    return Down();
  }
  Result<bool> Release(const RecordId&, const Token&) override {
    return Down();
  }
  Result<bool> Revoke(const RecordId&) override { return Down(); }
  Result<bool> ExtendLock(const RecordId&, const Token&, TimePoint,
                          Duration) override {
    return Down();
  }
  Result<std::optional<StoreStats>> Stats(TimePoint) override { return Down(); }
  Result<std::optional<Record>> Inspect(const RecordId&, TimePoint) override {
    return Down();
  }
  Result<std::size_t> PurgeExpired(TimePoint, std::size_t) override {
    return Down();
  }
  StoreInfo Info() const override { return {"down", true, true}; }

 private:
  static tl::unexpected<Error> Down() {
    return MakeError(ErrorCode::kUnavailable, "down");
  }
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_DOWN_STORE_H_
