// A Store for the lock-renewal tests (core and adapter): one mutex over a map,
// with ExtendLock by store.h's contract, a count of ExtendLock calls per
// record, an error to inject, and a hook that runs at the start of every
// ExtendLock (to race a Finish or a takeover with a renewal deterministically).
//
// Thread-safety: safe for concurrent use; set the hook and the error before
// the calls they are meant for.

#ifndef IDEM_TESTS_SUPPORT_RENEWAL_TEST_STORE_H_
#define IDEM_TESTS_SUPPORT_RENEWAL_TEST_STORE_H_

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include "idem/record.h"
#include "idem/store.h"

namespace idem::testing {

class RenewalTestStore final : public Store {
 public:
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override {
    std::lock_guard<std::mutex> lock(mu_);
    ClaimResult result;
    auto it = records_.find(id);
    if (it != records_.end()) {
      if (auto blocked = ClaimBlockedBy(it->second, fp, now)) return *blocked;
      result.takeover = !it->second.Expired(now);
    }
    Record& record = records_[id];
    record = NewClaimRecord(fp, now, ttl, lock_timeout);
    result.outcome = ClaimOutcome::kAcquired;
    result.token = record.token;
    result.locked_until = record.locked_until;
    return result;
  }

  Result<bool> Complete(const RecordId& id, const Token& token,
                        const idem::Response& response) override {
    std::lock_guard<std::mutex> lock(mu_);
    Record* record = Held(id, token);
    if (record == nullptr) return false;
    record->state = RecordState::kCompleted;
    record->response = std::make_shared<const idem::Response>(response);
    return true;
  }

  Result<bool> Release(const RecordId& id, const Token& token) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (Held(id, token) == nullptr) return false;
    records_.erase(id);
    return true;
  }

  Result<bool> Revoke(const RecordId& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    return records_.erase(id) > 0;
  }

  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) override {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++extends_[id];
      hook = std::exchange(before_extend_, nullptr);
    }
    if (hook) hook();
    if (fail_extend) {
      return MakeError(ErrorCode::kUnavailable, "injected ExtendLock failure");
    }
    std::lock_guard<std::mutex> lock(mu_);
    Record* record = Held(id, token);
    if (record == nullptr || record->Expired(now)) return false;
    record->locked_until = std::max(
        record->locked_until, std::min(now + lock_timeout, record->expires_at));
    return true;
  }

  Result<std::optional<Record>> Inspect(const RecordId& id,
                                        TimePoint now) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || it->second.Expired(now)) {
      return std::optional<Record>();
    }
    return std::optional<Record>(it->second);
  }

  Result<std::size_t> PurgeExpired(TimePoint, std::size_t) override {
    return std::size_t{0};
  }

  StoreInfo Info() const override {
    StoreInfo info;
    info.name = "renewal-test";
    info.calls_may_block = false;
    return info;
  }

  // ExtendLock calls for `id` so far, and for every record.
  int Extends(const RecordId& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = extends_.find(id);
    return it == extends_.end() ? 0 : it->second;
  }
  int Extends() {
    std::lock_guard<std::mutex> lock(mu_);
    int total = 0;
    for (const auto& [id, count] : extends_) total += count;
    return total;
  }
  // Runs once, at the start of the next ExtendLock (without the store's
  // lock held, so it may call the store).
  void BeforeNextExtend(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    before_extend_ = std::move(hook);
  }

  std::atomic<bool> fail_extend{false};

 private:
  Record* Held(const RecordId& id, const Token& token) {
    auto it = records_.find(id);
    if (it == records_.end() || it->second.state != RecordState::kInProgress ||
        it->second.token != token) {
      return nullptr;
    }
    return &it->second;
  }

  std::mutex mu_;
  std::map<RecordId, Record> records_;
  std::map<RecordId, int> extends_;
  std::function<void()> before_extend_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_RENEWAL_TEST_STORE_H_
