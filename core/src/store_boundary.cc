// See store_boundary.h.

#include "idem/store/store_boundary.h"

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <utility>

#include "idem/store/store_checks.h"

namespace idem {

Result<ClaimResult> StoreBoundary::Claim(const RecordId& id,
                                         const Fingerprint& fp, TimePoint now,
                                         Duration ttl, Duration lock_timeout) {
  // The message is built only when the check fails: no string on a claim.
  if (ttl <= Duration::zero() || lock_timeout <= Duration::zero()) {
    return tl::unexpected(
        CheckClaimDurations(context_ + ": ", ttl, lock_timeout).error());
  }
  return Call("claim", [&] { return DoClaim(id, fp, now, ttl, lock_timeout); });
}

std::optional<Result<ClaimResult>> StoreBoundary::TryClaimWithoutBlocking(
    const RecordId& id, const Fingerprint& fp, TimePoint now, Duration ttl,
    Duration lock_timeout) {
  if (ttl <= Duration::zero() || lock_timeout <= Duration::zero()) {
    return Result<ClaimResult>(tl::unexpected(
        CheckClaimDurations(context_ + ": ", ttl, lock_timeout).error()));
  }
  // An exception is the call's answer, as Claim's would be.
  auto tried = CatchExceptions(
      [&] { return context_ + ": claim"; },
      [&]() -> Result<std::optional<Result<ClaimResult>>> {
        return DoTryClaimWithoutBlocking(id, fp, now, ttl, lock_timeout);
      });
  if (!tried) {
    AfterError(tried.error());
    return Result<ClaimResult>(tl::unexpected(std::move(tried.error())));
  }
  return std::move(*tried);
}

namespace {

// One asynchronous call's answer through the boundary: errors reach
// AfterError first, and `done` runs once even if the store's Do*Async call
// threw after handing its callback on.
template <typename T>
struct AsyncAnswer {
  AsyncAnswer(StoreBoundary* boundary, StoreCallback<T> done,
              void (StoreBoundary::*after_error)(const Error&))
      : boundary(boundary), done(std::move(done)), after_error(after_error) {}
  void operator()(Result<T> result) {
    if (answered.exchange(true, std::memory_order_acq_rel)) return;
    if (!result) (boundary->*after_error)(result.error());
    done(std::move(result));
  }
  StoreBoundary* boundary;
  StoreCallback<T> done;
  void (StoreBoundary::*after_error)(const Error&);
  std::atomic<bool> answered{false};
};

}  // namespace

template <typename T, typename Start>
void StoreBoundary::CallAsync(std::string_view op, StoreCallback<T>& done,
                              Start&& start) {
  if (Status ready = BeforeCall(op); !ready) {
    done(tl::unexpected(ready.error()));
    return;
  }
  auto answer = std::make_shared<AsyncAnswer<T>>(this, std::move(done),
                                                 &StoreBoundary::AfterError);
  Status started = CatchExceptions(
      [&] { return context_ + ": " + std::string(op); },
      [&]() -> Status {
        start([answer](Result<T> result) { (*answer)(std::move(result)); });
        return {};
      });
  if (!started) (*answer)(tl::unexpected(std::move(started.error())));
}

void StoreBoundary::ClaimAsync(const RecordId& id, const Fingerprint& fp,
                               TimePoint now, Duration ttl,
                               Duration lock_timeout,
                               StoreCallback<ClaimResult> done) {
  if (ttl <= Duration::zero() || lock_timeout <= Duration::zero()) {
    done(tl::unexpected(
        CheckClaimDurations(context_ + ": ", ttl, lock_timeout).error()));
    return;
  }
  CallAsync<ClaimResult>("claim", done, [&](StoreCallback<ClaimResult> cb) {
    DoClaimAsync(id, fp, now, ttl, lock_timeout, std::move(cb));
  });
}

void StoreBoundary::CompleteAsync(const RecordId& id, const Token& token,
                                  std::shared_ptr<const Response> response,
                                  StoreCallback<bool> done) {
  CallAsync<bool>("complete", done, [&](StoreCallback<bool> cb) {
    DoCompleteAsync(id, token, std::move(response), std::move(cb));
  });
}

Result<bool> StoreBoundary::Complete(const RecordId& id, const Token& token,
                                     const Response& response) {
  return Call("complete", [&] { return DoComplete(id, token, response); });
}

Result<bool> StoreBoundary::CompleteShared(
    const RecordId& id, const Token& token,
    std::shared_ptr<const Response> response) {
  return Call("complete",
              [&] { return DoCompleteShared(id, token, std::move(response)); });
}

Result<bool> StoreBoundary::Release(const RecordId& id, const Token& token) {
  return Call("release", [&] { return DoRelease(id, token); });
}

Result<bool> StoreBoundary::Revoke(const RecordId& id) {
  return Call("revoke", [&] { return DoRevoke(id); });
}

Result<bool> StoreBoundary::ExtendLock(const RecordId& id, const Token& token,
                                       TimePoint now, Duration lock_timeout) {
  if (lock_timeout <= Duration::zero()) {
    return tl::unexpected(
        CheckLockTimeout(context_ + ": ", lock_timeout).error());
  }
  return Call("extend lock",
              [&] { return DoExtendLock(id, token, now, lock_timeout); });
}

Result<std::optional<StoreStats>> StoreBoundary::Stats(TimePoint now) {
  return Call("stats", [&] { return DoStats(now); });
}

Result<std::optional<Record>> StoreBoundary::Inspect(const RecordId& id,
                                                     TimePoint now) {
  return Call("inspect", [&] { return DoInspect(id, now); });
}

Result<std::size_t> StoreBoundary::PurgeExpired(TimePoint now,
                                                std::size_t limit) {
  return Call("purge", [&] { return DoPurgeExpired(now, limit); });
}

}  // namespace idem
