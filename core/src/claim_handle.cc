// ClaimHandle: what the request that holds a claim does with it (finish,
// release, forget, end in the caller's transaction). The Guard that made the
// claim keeps the metrics, the log and the observers; guard.cc has the rest.
#include "idem/claim_handle.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "idem/guard.h"
#include "idem/stored_response.h"
#include "response_seal.h"
#include "timed_store_call.h"

namespace idem {
namespace {

using internal::Timed;

// Hop-by-hop and length headers describe one transfer, not the resource:
// never store them, even when listed.
bool NeverStored(std::string_view name) {
  return HeaderNameEquals(name, "Content-Length") ||
         HeaderNameEquals(name, "Transfer-Encoding") ||
         HeaderNameEquals(name, "Connection") ||
         HeaderNameEquals(name, "Keep-Alive") ||
         // The stored form's own header (stored_response.h): a handler's
         // would make its response look like an envelope.
         HeaderNameEquals(name, kStoredResponseHeader);
}

// What Finish stores of `response`: its status and body, and only the
// headers the route lists.
Response StoredForm(const GuardOptions& opts, const Response& response) {
  Response stored;
  stored.status = response.status;
  for (const Header& header : response.headers) {
    if (NeverStored(header.first)) continue;
    const bool listed =
        std::any_of(opts.stored_headers.begin(), opts.stored_headers.end(),
                    [&](const std::string& allowed) {
                      return HeaderNameEquals(allowed, header.first);
                    });
    if (listed) stored.headers.push_back(header);
  }
  stored.body = response.body;
  return stored;
}

}  // namespace

ClaimHandle& ClaimHandle::operator=(ClaimHandle&& other) noexcept {
  if (this != &other) {
    Abandon();
    guard_ = std::exchange(other.guard_, nullptr);
    id_ = other.id_;
    token_ = other.token_;
    takeover_ = other.takeover_;
    locked_until_ = other.locked_until_;
    instance_ = std::move(other.instance_);
    in_transaction_ = std::exchange(other.in_transaction_, InTransaction::kNo);
    options_ = std::move(other.options_);
    started_ = other.started_;
    method_ = std::move(other.method_);
    route_ = std::move(other.route_);
    lease_ = std::move(other.lease_);
    pending_ = std::move(other.pending_);
  }
  return *this;
}

LockState ClaimHandle::lock_state() const {
  if (guard_ == nullptr) return LockState::kEnded;
  if (in_transaction_ == InTransaction::kClaimLost) return LockState::kLost;
  if (in_transaction_ == InTransaction::kCommitted) return LockState::kEnded;
  if (lease_) return lease_->State();
  // Not renewed: held until the claim's own lock times out.
  return guard_->clock().Now() < locked_until_ ? LockState::kHeld
                                               : LockState::kMayBeLost;
}

void ClaimHandle::Abandon() {
  if (guard_ == nullptr) return;
  EndLease();
  if (in_transaction_ != InTransaction::kNo) {
    // Ended inside the caller's transaction: completed there, or lost to
    // another request. There is nothing to release.
    EndInTransaction(0);
    return;
  }
  const Duration latency = guard_->ReleaseClaim(*this, Outcome::kReleased);
  guard_->ClaimEnded(*this, FinishResult::kReleased, 0, latency);
  guard_ = nullptr;
}

void ClaimHandle::Forget(std::string_view why) {
  if (guard_ == nullptr) return;
  EndLease();
  if (in_transaction_ != InTransaction::kNo) {
    // Ended in the caller's transaction already: no store call was missed.
    EndInTransaction(0);
    return;
  }
  Guard& guard = *std::exchange(guard_, nullptr);
  guard.metrics().Count(Outcome::kStoreFailed);
  guard.Log(LogLevel::kError, std::string(why) +
                                  "; the key stays locked until its lock "
                                  "timeout, record " +
                                  id_.ToHex());
  guard.ClaimEnded(*this, FinishResult::kStoreFailed, 0, Duration::zero());
}

std::optional<Response> ClaimHandle::StorableResponse(
    const Response& response) const {
  if (guard_ == nullptr) return std::nullopt;
  const GuardOptions& opts = *options_;
  if (!opts.stored_statuses.Contains(response.status) ||
      response.body.size() > opts.max_stored_response) {
    return std::nullopt;
  }
  // Never in clear what the route seals: a failure to seal is "not
  // storable", and Finish then logs it and releases the key.
  auto stored =
      internal::ToStoredForm(options_, guard_->options(), id_,
                             StoredForm(opts, response), guard_->clock().Now());
  if (!stored) return std::nullopt;
  return std::move(*stored);
}

FinishResult ClaimHandle::EndInTransaction(int status) {
  Guard& guard = *std::exchange(guard_, nullptr);
  if (in_transaction_ == InTransaction::kCommitted) {
    guard.ClaimEnded(*this, FinishResult::kStored, status, Duration::zero());
    return FinishResult::kStored;
  }
  guard.metrics().Count(Outcome::kStaleComplete);
  // No store call here (the caller's transaction may still hold the
  // store's connection): the reason is not read, unlike Finish's.
  guard.Log(LogLevel::kWarning,
            "completion in the application's transaction found the claim "
            "lost (another request took the key over, or the record was "
            "revoked); rolled back, record " +
                id_.ToHex());
  guard.ClaimEnded(*this, FinishResult::kStaleComplete, status,
                   Duration::zero());
  return FinishResult::kStaleComplete;
}

struct ClaimHandle::PendingCompletion {
  // Written on the store's thread before `answered` runs; read by the
  // Finish that follows it.
  std::optional<Result<bool>> answer;
  Duration latency{};
  // The stored form the store writes, kept here too so that its last
  // owner is usually the Finish on the caller's thread, not the store's
  // thread (which would free blocks another thread's allocator arena
  // holds, waiting for that arena's lock: benchmarks/http/NOTES.md).
  std::shared_ptr<const Response> stored;
};

bool ClaimHandle::StartFinish(const Response& response,
                              std::function<void()> answered) {
  if (guard_ == nullptr || pending_ || in_transaction_ != InTransaction::kNo ||
      !guard_->calls_store_asynchronously()) {
    return false;
  }
  const GuardOptions& opts = *options_;
  // What Finish would not complete (a release, an unstorable response) is
  // Finish's to do, on a thread that may block.
  if (!opts.stored_statuses.Contains(response.status) ||
      response.body.size() > opts.max_stored_response) {
    return false;
  }
  Guard& guard = *guard_;
  auto stored =
      internal::ToStoredForm(options_, guard.options(), id_,
                             StoredForm(opts, response), guard.clock().Now());
  if (!stored) return false;  // Finish logs it and releases the key.
  EndLease();
  auto pending = std::make_shared<PendingCompletion>();
  pending->stored = std::make_shared<const Response>(std::move(*stored));
  pending_ = pending;
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const Response> record = pending->stored;
  guard.store().CompleteAsync(
      id_, token_, std::move(record),
      [&metrics = guard.metrics(), pending = std::move(pending), start,
       answered = std::move(answered)](Result<bool> done) mutable {
        internal::Observed(metrics, StoreOperation::kComplete, pending->latency,
                           start);
        pending->answer = std::move(done);
        // Before `answered`: from then on the Finish that reads the answer
        // owns the pending state alone, and frees it on its own thread.
        pending.reset();
        answered();
      });
  return true;
}

FinishResult ClaimHandle::Finish(const Response& response) {
  if (guard_ == nullptr) return FinishResult::kInactive;
  EndLease();
  if (in_transaction_ != InTransaction::kNo) {
    return EndInTransaction(response.status);
  }
  Guard& guard = *std::exchange(guard_, nullptr);
  if (pending_) {
    // StartFinish made the store call; its answer is in.
    const std::shared_ptr<PendingCompletion> pending = std::move(pending_);
    return EndCompletion(guard, std::move(*pending->answer), pending->latency,
                         response.status);
  }
  const GuardOptions& opts = *options_;
  auto ended = [&](FinishResult result, Duration store_latency) {
    guard.ClaimEnded(*this, result, response.status, store_latency);
    return result;
  };
  if (!opts.stored_statuses.Contains(response.status)) {
    return ended(FinishResult::kReleased,
                 guard.ReleaseClaim(*this, Outcome::kReleased));
  }
  if (response.body.size() > opts.max_stored_response) {
    guard.Log(LogLevel::kWarning,
              "response of " + std::to_string(response.body.size()) +
                  " bytes exceeds max_stored_response (" +
                  std::to_string(opts.max_stored_response) +
                  "); sent unstored and key released, record " + id_.ToHex());
    return ended(FinishResult::kNotStored,
                 guard.ReleaseClaim(*this, Outcome::kNotStored));
  }
  auto stored =
      internal::ToStoredForm(options_, guard.options(), id_,
                             StoredForm(opts, response), guard.clock().Now());
  if (!stored) {
    guard.Log(LogLevel::kError,
              "the response could not be put in its stored form (" +
                  stored.error().ToString() +
                  "); sent unstored and key released, record " + id_.ToHex());
    return ended(FinishResult::kNotStored,
                 guard.ReleaseClaim(*this, Outcome::kNotStored));
  }
  auto stored_ptr = std::make_shared<const Response>(std::move(*stored));
  Duration latency{};
  auto done = Timed(guard.metrics(), StoreOperation::kComplete, latency, [&] {
    return guard.store().CompleteShared(id_, token_, std::move(stored_ptr));
  });
  return EndCompletion(guard, std::move(done), latency, response.status);
}

FinishResult ClaimHandle::EndCompletion(Guard& guard, Result<bool> done,
                                        Duration latency, int status) {
  auto ended = [&](FinishResult result) {
    guard.ClaimEnded(*this, result, status, latency);
    return result;
  };
  if (!done) {
    guard.metrics().Count(Outcome::kStoreFailed);
    guard.Log(LogLevel::kError,
              "storing the response failed (" + done.error().ToString() +
                  "); the key stays locked until its lock timeout, record " +
                  id_.ToHex());
    return ended(FinishResult::kStoreFailed);
  }
  if (!*done) {
    guard.metrics().Count(Outcome::kStaleComplete);
    guard.Log(LogLevel::kWarning,
              "response not stored: " + guard.ClaimLostReason(*this) +
                  ", record " + id_.ToHex());
    return ended(FinishResult::kStaleComplete);
  }
  return ended(FinishResult::kStored);
}

}  // namespace idem
