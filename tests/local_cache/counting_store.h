// The inner store of the local cache's tests: the memory store behind a
// ForwardingStore that counts the claims and reads that reach it, may say
// that its calls block (as a remote store's do) or leave out a replay's
// expiry, and can run a hook in the middle of a claim, a read or a
// completion (after the store answered, before the cache sees the answer),
// to interleave a revoke with a fill deterministically.
//
// Thread-safety: as the memory store's; the hooks are set before the
// threads start.

#ifndef IDEM_TESTS_LOCAL_CACHE_COUNTING_STORE_H_
#define IDEM_TESTS_LOCAL_CACHE_COUNTING_STORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <utility>

#include "idem/open_store.h"
#include "idem/store/forwarding_store.h"

namespace idem::testing {

class CountingStore final : public ForwardingStore {
 public:
  // Over a fresh memory store.
  CountingStore() : ForwardingStore(OpenMemory()) {}

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override {
    claims.fetch_add(1);
    auto out = ForwardingStore::Claim(id, fp, now, ttl, lock_timeout);
    if (out && forget_expiry) out->expires_at = TimePoint{};
    if (after_claim) after_claim();
    return out;
  }
  std::optional<Result<ClaimResult>> TryClaimWithoutBlocking(
      const RecordId& id, const Fingerprint& fp, TimePoint now, Duration ttl,
      Duration lock_timeout) override {
    tries.fetch_add(1);
    return ForwardingStore::TryClaimWithoutBlocking(id, fp, now, ttl,
                                                    lock_timeout);
  }
  // With says_it_blocks, a remote store's Info (calls_may_block), so that a
  // Guard over it takes the non-blocking path (set before the Guard is made).
  StoreInfo Info() const override {
    StoreInfo info = ForwardingStore::Info();
    if (says_it_blocks) info.calls_may_block = true;
    return info;
  }
  Result<std::optional<Record>> Inspect(const RecordId& id,
                                        TimePoint now) override {
    inspects.fetch_add(1);
    auto out = ForwardingStore::Inspect(id, now);
    if (after_inspect) after_inspect();
    return out;
  }
  Result<bool> CompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const Response> response) override {
    auto out = ForwardingStore::CompleteShared(id, token, std::move(response));
    if (after_complete) after_complete();
    return out;
  }
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) override {
    auto out = ForwardingStore::Complete(id, token, response);
    if (after_complete) after_complete();
    return out;
  }

  std::atomic<int> claims{0};
  std::atomic<int> tries{0};  // TryClaimWithoutBlocking calls.
  std::atomic<int> inspects{0};
  bool says_it_blocks = false;
  // Answers claims without ClaimResult::expires_at, as a store that builds
  // its answers itself may.
  bool forget_expiry = false;
  std::function<void()> after_claim;
  std::function<void()> after_inspect;
  std::function<void()> after_complete;

 private:
  static std::shared_ptr<Store> OpenMemory() {
    auto opened = OpenStore("memory:?sweep_interval_s=0");
    return opened ? std::shared_ptr<Store>(std::move(*opened)) : nullptr;
  }
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_LOCAL_CACHE_COUNTING_STORE_H_
