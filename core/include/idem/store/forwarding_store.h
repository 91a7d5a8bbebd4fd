// ForwardingStore: a Store that forwards every call to an inner store, for
// decorators that override only what they change (metrics, fault injection,
// ownership of background work such as a sweeper).
//
// Every Store operation, CompleteShared included, goes to the same operation
// of the inner store with the same arguments, and its result comes back
// unchanged; Info() is the inner store's. A decorator that overrides Complete
// must also override CompleteShared if both are to pass through its change:
// here CompleteShared forwards to the inner store directly, so the inner
// store may keep the shared response without a copy. Likewise a decorator
// that overrides Claim must override TryClaimWithoutBlocking (returning
// nullopt is enough) if every claim is to pass through its change: here it
// forwards, so an inner local cache's hits are answered without it.
//
// The asynchronous calls (ClaimAsync, CompleteAsync) are forwarded only by
// a decorator that says so (ForwardAsync::kYes, e.g. one that owns a
// sweeper and changes no call): by default they are Store's, the
// synchronous calls made inside, so they pass through the decorator's own
// Claim and CompleteShared, and Info().async_calls is false whatever the
// inner store's is. A decorator that changes claims or completions and
// forwards the asynchronous calls must override them too.
//
// Ownership: the ForwardingStore shares ownership of the inner store, which
// lives at least as long as it. A derived class's members are destroyed
// before the inner store is released, so a decorator may own background work
// that uses the inner store.
//
// Thread-safety: as the inner store's (every Store's is: store.h).

#ifndef IDEM_STORE_FORWARDING_STORE_H_
#define IDEM_STORE_FORWARDING_STORE_H_

#include <cstddef>
#include <memory>
#include <optional>

#include "idem/store.h"

namespace idem {

class ForwardingStore : public Store {
 public:
  // Whether ClaimAsync and CompleteAsync go to the inner store's.
  enum class ForwardAsync { kNo, kYes };

  // `inner` must not be null. Default: kNo.
  explicit ForwardingStore(std::shared_ptr<Store> inner,
                           ForwardAsync forward_async = ForwardAsync::kNo);
  ~ForwardingStore() override;

  ForwardingStore(const ForwardingStore&) = delete;
  ForwardingStore& operator=(const ForwardingStore&) = delete;

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) override;
  std::optional<Result<ClaimResult>> TryClaimWithoutBlocking(
      const RecordId& id, const Fingerprint& fp, TimePoint now, Duration ttl,
      Duration lock_timeout) override;
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) override;
  Result<bool> CompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const Response> response) override;
  void ClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                  Duration ttl, Duration lock_timeout,
                  StoreCallback<ClaimResult> done) override;
  void CompleteAsync(const RecordId& id, const Token& token,
                     std::shared_ptr<const Response> response,
                     StoreCallback<bool> done) override;
  Result<bool> Release(const RecordId& id, const Token& token) override;
  Result<bool> Revoke(const RecordId& id) override;
  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) override;
  Result<std::optional<StoreStats>> Stats(TimePoint now) override;
  Result<std::optional<Record>> Inspect(const RecordId& id,
                                        TimePoint now) override;
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) override;
  StoreInfo Info() const override;

 protected:
  Store& inner() const { return *inner_; }

 private:
  std::shared_ptr<Store> inner_;
  bool forward_async_;
};

}  // namespace idem

#endif  // IDEM_STORE_FORWARDING_STORE_H_
