// StoreBoundary: the call boundary every store shares, written once. A
// store derives from it instead of from Store and implements only its
// storage logic (the Do* calls); the public Store calls, final here, check
// the arguments store.h states (ttl and lock_timeout positive), turn any
// exception into an Error (idem/store/catch_exceptions.h: bad_alloc ->
// kResourceExhausted, anything else -> kInternal) and name the store and
// the operation in those errors:
//
//   class MapStore final : public idem::StoreBoundary {
//    public:
//     MapStore() : StoreBoundary("map store") {}
//     StoreInfo Info() const override { return {.name = "map", ...}; }
//    protected:
//     Result<ClaimResult> DoClaim(...) override;  // ttl, lock_timeout > 0
//     ...
//   };
//
// Why a base class and not Store itself (non-virtual public calls over
// protected virtuals in store.h): see docs/ARCHITECTURE.md, "The store
// SPI". A store that derives from Store directly still works everywhere;
// the contract suite (idem::testing) checks that it keeps the same rules.
//
// Errors each public call adds to its Do* call's own:
//  - kInvalidArgument "<context>: ttl and lock_timeout must be positive"
//    (Claim) or "<context>: lock_timeout must be positive" (ExtendLock),
//    before the store is called;
//  - kResourceExhausted "<context>: <op>: out of memory", kInternal
//    "<context>: <op>: exception: <what>" when the Do* call throws;
//  - what BeforeCall returns, when it fails (the Do* call is not made).
//
// Thread-safety: the boundary adds no state; a store is as safe for
// concurrent use as its Do* calls, which store.h requires of every store.

#ifndef IDEM_STORE_STORE_BOUNDARY_H_
#define IDEM_STORE_STORE_BOUNDARY_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "idem/error.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/store/catch_exceptions.h"
#include "idem/types.h"

namespace idem {

class StoreBoundary : public Store {
 public:
  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) final;
  std::optional<Result<ClaimResult>> TryClaimWithoutBlocking(
      const RecordId& id, const Fingerprint& fp, TimePoint now, Duration ttl,
      Duration lock_timeout) final;
  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) final;
  Result<bool> CompleteShared(const RecordId& id, const Token& token,
                              std::shared_ptr<const Response> response) final;
  void ClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                  Duration ttl, Duration lock_timeout,
                  StoreCallback<ClaimResult> done) final;
  void CompleteAsync(const RecordId& id, const Token& token,
                     std::shared_ptr<const Response> response,
                     StoreCallback<bool> done) final;
  Result<bool> Release(const RecordId& id, const Token& token) final;
  Result<bool> Revoke(const RecordId& id) final;
  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) final;
  Result<std::optional<StoreStats>> Stats(TimePoint now) final;
  Result<std::optional<Record>> Inspect(const RecordId& id,
                                        TimePoint now) final;
  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) final;

 protected:
  // `context` starts every error message the boundary makes: the store and
  // where it is, e.g. "sqlite store '/var/idem.db'".
  explicit StoreBoundary(std::string context) : context_(std::move(context)) {}

  const std::string& context() const { return context_; }

  // The storage logic, called only with the arguments the public call
  // checked (ttl and lock_timeout positive); what they return is what the
  // public call returns. Same contracts as store.h's calls of the same
  // names.
  virtual Result<ClaimResult> DoClaim(const RecordId& id, const Fingerprint& fp,
                                      TimePoint now, Duration ttl,
                                      Duration lock_timeout) = 0;
  // Store::TryClaimWithoutBlocking's storage logic, with the same checks
  // and exception boundary as DoClaim but no BeforeCall (it must not block;
  // an answer it cannot give at once is nullopt). Default: nullopt.
  virtual std::optional<Result<ClaimResult>> DoTryClaimWithoutBlocking(
      const RecordId& id, const Fingerprint& fp, TimePoint now, Duration ttl,
      Duration lock_timeout) {
    (void)id, (void)fp, (void)now, (void)ttl, (void)lock_timeout;
    return std::nullopt;
  }
  virtual Result<bool> DoComplete(const RecordId& id, const Token& token,
                                  const Response& response) = 0;
  // Default: DoComplete with a copy of the response.
  virtual Result<bool> DoCompleteShared(
      const RecordId& id, const Token& token,
      std::shared_ptr<const Response> response) {
    return DoComplete(id, token, *response);
  }
  // The asynchronous calls' storage logic (store.h, ClaimAsync), behind the
  // same checks as the synchronous calls (an argument error calls `done` at
  // once and the Do* call is not made), BeforeCall (which must not block
  // in a store whose Info().async_calls is true) and exception boundary: a
  // Do*Async call that throws must not have called `done`, and `done` then
  // gets the error. An error reaches AfterError before `done`. Called only
  // with a non-empty `done`. Default: DoClaim or DoCompleteShared, made
  // inside, then `done`.
  virtual void DoClaimAsync(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl, Duration lock_timeout,
                            StoreCallback<ClaimResult> done) {
    done(DoClaim(id, fp, now, ttl, lock_timeout));
  }
  virtual void DoCompleteAsync(const RecordId& id, const Token& token,
                               std::shared_ptr<const Response> response,
                               StoreCallback<bool> done) {
    done(DoCompleteShared(id, token, std::move(response)));
  }
  virtual Result<bool> DoRelease(const RecordId& id, const Token& token) = 0;
  virtual Result<bool> DoRevoke(const RecordId& id) = 0;
  virtual Result<bool> DoExtendLock(const RecordId& id, const Token& token,
                                    TimePoint now, Duration lock_timeout) = 0;
  // Default: nullopt (the store does not count).
  virtual Result<std::optional<StoreStats>> DoStats(TimePoint now) {
    (void)now;
    return std::optional<StoreStats>();
  }
  virtual Result<std::optional<Record>> DoInspect(const RecordId& id,
                                                  TimePoint now) = 0;
  virtual Result<std::size_t> DoPurgeExpired(TimePoint now,
                                             std::size_t limit) = 0;

  // Before every call (`op`: "claim", "complete", ...): an error here is
  // the call's answer and the Do* call is not made (a store that refuses
  // calls while its server is unusable). Default: go ahead.
  virtual Status BeforeCall(std::string_view op) {
    (void)op;
    return {};
  }
  // After a call that failed with `error` (a store that checks its server
  // again after some errors). Default: nothing.
  virtual void AfterError(const Error& error) { (void)error; }

  // Runs `fn` (which returns a Result or Status) inside the same boundary
  // as the public calls, under the name `op`: for a store's own public
  // calls beyond Store's (a compaction, a transaction's completion).
  template <typename Fn>
  auto Call(std::string_view op, Fn&& fn) -> decltype(fn()) {
    if (Status ready = BeforeCall(op); !ready) {
      return tl::unexpected(ready.error());
    }
    auto result =
        CatchExceptions([&] { return context_ + ": " + std::string(op); },
                        std::forward<Fn>(fn));
    if (!result) AfterError(result.error());
    return result;
  }

 private:
  // The asynchronous calls' boundary: BeforeCall, then start(callback)
  // inside the exception boundary; `done` (moved from) gets the answer
  // once, an error after AfterError.
  template <typename T, typename Start>
  void CallAsync(std::string_view op, StoreCallback<T>& done, Start&& start);

  std::string context_;
};

}  // namespace idem

#endif  // IDEM_STORE_STORE_BOUNDARY_H_
