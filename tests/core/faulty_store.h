// A Store decorator for driving the Guard's error paths: forwards to a real
// store and fails the operations a test selects. Used only where a test is
// about the Guard's logic; every backend's real failure modes are covered by
// its own tests.

#ifndef IDEM_TESTS_CORE_FAULTY_STORE_H_
#define IDEM_TESTS_CORE_FAULTY_STORE_H_

#include <atomic>
#include <memory>
#include <optional>

#include "idem/store.h"

namespace idem::testing {

class FaultyStore final : public Store {
 public:
  explicit FaultyStore(std::shared_ptr<Store> inner)
      : inner_(std::move(inner)) {}

  // While set, the operation fails with this code.
  std::optional<ErrorCode> fail_claim;
  std::optional<ErrorCode> fail_complete;
  std::optional<ErrorCode> fail_release;
  std::atomic<int> claims{0};
  std::atomic<int> completes{0};
  std::atomic<int> releases{0};

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override {
    ++claims;
    if (fail_claim) return MakeError(*fail_claim, "injected claim failure");
    return inner_->Claim(id, fp, now, ttl, lock_timeout);
  }
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) override {
    ++completes;
    if (fail_complete) {
      return MakeError(*fail_complete, "injected complete failure");
    }
    return inner_->Complete(id, token, response);
  }
  Result<bool> CompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const Response> response) override {
    ++completes;
    if (fail_complete) {
      return MakeError(*fail_complete, "injected complete failure");
    }
    return inner_->CompleteShared(id, token, std::move(response));
  }
  Result<bool> Release(const RecordId& id, const Token& token) override {
    ++releases;
    if (fail_release)
      return MakeError(*fail_release, "injected release failure");
    return inner_->Release(id, token);
  }
  Result<std::optional<Record>> Inspect(const RecordId& id,
                                        TimePoint now) override {
    return inner_->Inspect(id, now);
  }
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) override {
    return inner_->PurgeExpired(now, limit);
  }
  StoreInfo Info() const override { return inner_->Info(); }

 private:
  std::shared_ptr<Store> inner_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_CORE_FAULTY_STORE_H_
