#include "idem/store/forwarding_store.h"

#include <utility>

namespace idem {

ForwardingStore::ForwardingStore(std::shared_ptr<Store> inner,
                                 ForwardAsync forward_async)
    : inner_(std::move(inner)),
      forward_async_(forward_async == ForwardAsync::kYes) {}

ForwardingStore::~ForwardingStore() = default;

Result<ClaimResult> ForwardingStore::Claim(const RecordId& id,
                                           const Fingerprint& fp, TimePoint now,
                                           Duration ttl,
                                           Duration lock_timeout) {
  return inner_->Claim(id, fp, now, ttl, lock_timeout);
}

std::optional<Result<ClaimResult>> ForwardingStore::TryClaimWithoutBlocking(
    const RecordId& id, const Fingerprint& fp, TimePoint now, Duration ttl,
    Duration lock_timeout) {
  return inner_->TryClaimWithoutBlocking(id, fp, now, ttl, lock_timeout);
}

Result<bool> ForwardingStore::Complete(const RecordId& id, const Token& token,
                                       const Response& response) {
  return inner_->Complete(id, token, response);
}

Result<bool> ForwardingStore::CompleteShared(
    const RecordId& id, const Token& token,
    std::shared_ptr<const Response> response) {
  return inner_->CompleteShared(id, token, std::move(response));
}

void ForwardingStore::ClaimAsync(const RecordId& id, const Fingerprint& fp,
                                 TimePoint now, Duration ttl,
                                 Duration lock_timeout,
                                 StoreCallback<ClaimResult> done) {
  if (!forward_async_) {
    Store::ClaimAsync(id, fp, now, ttl, lock_timeout, std::move(done));
    return;
  }
  inner_->ClaimAsync(id, fp, now, ttl, lock_timeout, std::move(done));
}

void ForwardingStore::CompleteAsync(const RecordId& id, const Token& token,
                                    std::shared_ptr<const Response> response,
                                    StoreCallback<bool> done) {
  if (!forward_async_) {
    Store::CompleteAsync(id, token, std::move(response), std::move(done));
    return;
  }
  inner_->CompleteAsync(id, token, std::move(response), std::move(done));
}

Result<bool> ForwardingStore::Release(const RecordId& id, const Token& token) {
  return inner_->Release(id, token);
}

Result<bool> ForwardingStore::Revoke(const RecordId& id) {
  return inner_->Revoke(id);
}

Result<bool> ForwardingStore::ExtendLock(const RecordId& id, const Token& token,
                                         TimePoint now, Duration lock_timeout) {
  return inner_->ExtendLock(id, token, now, lock_timeout);
}

Result<std::optional<StoreStats>> ForwardingStore::Stats(TimePoint now) {
  return inner_->Stats(now);
}

Result<std::optional<Record>> ForwardingStore::Inspect(const RecordId& id,
                                                       TimePoint now) {
  return inner_->Inspect(id, now);
}

Result<std::size_t> ForwardingStore::PurgeExpired(TimePoint now,
                                                  std::size_t limit) {
  return inner_->PurgeExpired(now, limit);
}

StoreInfo ForwardingStore::Info() const {
  StoreInfo info = inner_->Info();
  info.async_calls = info.async_calls && forward_async_;
  return info;
}

}  // namespace idem
