#include "rocksdb_background_errors.h"

#include <utility>

namespace idem::rocksdb_internal {

void BackgroundErrors::OnBackgroundError(
    rocksdb::BackgroundErrorReason /*reason*/, rocksdb::Status* error) {
  if (error == nullptr || error->ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;
  if (error->severity() >= rocksdb::Status::Severity::kHardError) {
    stopped_ = true;
  }
  last_error_ = error->ToString();
  pending_.store(true, std::memory_order_release);
}

void BackgroundErrors::OnErrorRecoveryBegin(
    rocksdb::BackgroundErrorReason /*reason*/, rocksdb::Status /*error*/,
    bool* auto_recovery) {
  if (auto_recovery != nullptr) *auto_recovery = false;
}

std::optional<std::string> BackgroundErrors::BlockedLocked() const {
  if (!pending_.load(std::memory_order_relaxed) || !stopped_) {
    return std::nullopt;
  }
  return "writes stopped by a background error until the store recovers "
         "(it retries every second): " +
         last_error_;
}

std::optional<std::string> BackgroundErrors::Check(
    const std::function<rocksdb::Status()>& resume) {
  if (!pending_.load(std::memory_order_acquire)) return std::nullopt;
  std::unique_lock<std::mutex> resuming(resume_mu_, std::try_to_lock);
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    // Another thread is resuming, or the last attempt was too recent.
    if (!resuming.owns_lock() || now < next_resume_) return BlockedLocked();
    next_resume_ = now + kResumeInterval;
    generation = generation_;
  }
  const rocksdb::Status s = resume();
  std::lock_guard<std::mutex> lock(mu_);
  // An error reported while resuming is not cleared by this resume.
  if (s.ok() && generation == generation_) {
    stopped_ = false;
    pending_.store(false, std::memory_order_release);
  } else if (!s.ok()) {
    last_error_ = s.ToString();
  }
  return BlockedLocked();
}

}  // namespace idem::rocksdb_internal
