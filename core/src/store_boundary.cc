// See store_boundary.h.

#include "idem/store/store_boundary.h"

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
