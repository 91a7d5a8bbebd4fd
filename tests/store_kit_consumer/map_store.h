// MapStore: a store written outside idem, the one docs/GUIDE.md's "Writing
// a store" shows: one mutex around one std::map. Deriving from
// idem::StoreBoundary gives it the argument checks and the exception
// boundary every store needs (idem/store/store_boundary.h); the claim table
// is core's (ClaimBlockedBy, NewClaimRecord, ClaimAcquired,
// RenewedLockUntil in idem/store.h), so what is left is the storage.
//
// Thread-safety: every call takes the one mutex.

#ifndef MAP_STORE_H_
#define MAP_STORE_H_

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <idem/store.h>
#include <idem/store/store_boundary.h>

class MapStore final : public idem::StoreBoundary {
 public:
  MapStore() : StoreBoundary("map store") {}

  idem::StoreInfo Info() const override {
    return {.name = "map",
            .durable = false,
            .shared_across_processes = false,
            .calls_may_block = true};  // It takes a mutex.
  }

 protected:
  idem::Result<idem::ClaimResult> DoClaim(
      const idem::RecordId& id, const idem::Fingerprint& fp,
      idem::TimePoint now, idem::Duration ttl,
      idem::Duration lock_timeout) override {
    std::lock_guard lock(mu_);
    bool takeover = false;
    if (auto it = records_.find(id); it != records_.end()) {
      // Mismatch, completed or in progress: the record's answer.
      if (auto blocked = idem::ClaimBlockedBy(it->second, fp, now)) {
        return *blocked;
      }
      takeover = !it->second.Expired(now);  // A timed-out lock.
    }
    const idem::Record fresh = idem::NewClaimRecord(fp, now, ttl, lock_timeout);
    records_.insert_or_assign(id, fresh);
    return idem::ClaimAcquired(fresh, takeover);
  }

  idem::Result<bool> DoComplete(const idem::RecordId& id,
                                const idem::Token& token,
                                const idem::Response& response) override {
    std::lock_guard lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || !it->second.HeldBy(token)) return false;
    it->second.state = idem::RecordState::kCompleted;
    it->second.response = std::make_shared<const idem::Response>(response);
    return true;
  }

  idem::Result<bool> DoRelease(const idem::RecordId& id,
                               const idem::Token& token) override {
    std::lock_guard lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || !it->second.HeldBy(token)) return false;
    records_.erase(it);
    return true;
  }

  idem::Result<bool> DoRevoke(const idem::RecordId& id) override {
    std::lock_guard lock(mu_);
    return records_.erase(id) == 1;
  }

  idem::Result<bool> DoExtendLock(const idem::RecordId& id,
                                  const idem::Token& token, idem::TimePoint now,
                                  idem::Duration lock_timeout) override {
    std::lock_guard lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end()) return false;
    const std::optional<idem::TimePoint> until =
        idem::RenewedLockUntil(it->second, token, now, lock_timeout);
    if (!until) return false;
    it->second.locked_until = *until;
    return true;
  }

  idem::Result<std::optional<idem::Record>> DoInspect(
      const idem::RecordId& id, idem::TimePoint now) override {
    std::lock_guard lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end() || it->second.Expired(now)) {
      return std::optional<idem::Record>();
    }
    return std::optional<idem::Record>(it->second);
  }

  idem::Result<std::size_t> DoPurgeExpired(idem::TimePoint now,
                                           std::size_t limit) override {
    std::lock_guard lock(mu_);
    std::size_t purged = 0;
    for (auto it = records_.begin(); it != records_.end() && purged < limit;) {
      if (it->second.Expired(now)) {
        it = records_.erase(it);
        ++purged;
      } else {
        ++it;
      }
    }
    return purged;
  }

 private:
  std::mutex mu_;
  std::map<idem::RecordId, idem::Record> records_;
};

#endif  // MAP_STORE_H_
