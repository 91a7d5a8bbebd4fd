#include "idem/guard_options.h"

#include <string>

#include "fingerprint_fields.h"

namespace idem {

StatusSet StatusSet::Default() {
  StatusSet s;
  s.AddRange(200, 499).Remove(408).Remove(425).Remove(429);
  return s;
}

StatusSet& StatusSet::AddRange(int first, int last) {
  for (int s = first < 0 ? 0 : first; s <= last && s < 1000; ++s) {
    bits_.set(static_cast<std::size_t>(s));
  }
  return *this;
}

StatusSet& StatusSet::Remove(int status) {
  if (status >= 0 && status < 1000)
    bits_.reset(static_cast<std::size_t>(status));
  return *this;
}

namespace {

// "24 h", "365 days", "10 s": how the maxima are written in the header.
std::string Describe(Duration d) {
  using std::chrono::duration_cast;
  const auto secs = duration_cast<std::chrono::seconds>(d).count();
  if (secs % 86400 == 0 && secs >= 2 * 86400) {
    return std::to_string(secs / 86400) + " days";
  }
  if (secs % 3600 == 0 && secs > 0) return std::to_string(secs / 3600) + " h";
  return std::to_string(secs) + " s";
}

}  // namespace

Status GuardOptions::Validate() const {
  auto bad = [](const std::string& what) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "invalid guard option: " + what);
  };
  auto at_most = [](const char* field, Duration max) {
    return std::string(field) + " must be at most " + Describe(max);
  };
  if (ttl <= Duration::zero()) return bad("ttl must be positive");
  if (ttl > kMaxTtl) return bad(at_most("ttl", kMaxTtl));
  if (lock_timeout <= Duration::zero()) {
    return bad("lock_timeout must be positive");
  }
  if (lock_timeout > kMaxLockTimeout) {
    return bad(at_most("lock_timeout", kMaxLockTimeout));
  }
  // Renewing at or after the lock's timeout would let a retry take a live
  // handler over between two renewals.
  if (lock_renewal < Duration::zero()) {
    return bad("lock_renewal must not be negative");
  }
  if (lock_renewal > Duration::zero() && lock_renewal >= lock_timeout) {
    return bad("lock_renewal must be below lock_timeout");
  }
  // Zero would retry a failing store in a tight loop.
  if (lock_renewal_retry <= Duration::zero()) {
    return bad("lock_renewal_retry must be positive");
  }
  if (lock_renewal_retry > kMaxLockRenewalRetry) {
    return bad(at_most("lock_renewal_retry", kMaxLockRenewalRetry));
  }
  if (lock_wait < Duration::zero()) {
    return bad("lock_wait must not be negative");
  }
  if (lock_wait > kMaxLockWait) return bad(at_most("lock_wait", kMaxLockWait));
  if (retry_after < Duration::zero()) {
    return bad("retry_after must not be negative");
  }
  if (retry_after > kMaxRetryAfter) {
    return bad(at_most("retry_after", kMaxRetryAfter));
  }
  if (store_backoff < Duration::zero()) {
    return bad("store_backoff must not be negative");
  }
  if (store_backoff > kMaxStoreBackoff) {
    return bad(at_most("store_backoff", kMaxStoreBackoff));
  }
  if (max_key_length == 0) return bad("max_key_length must be positive");
  if (max_request_body == 0) return bad("max_request_body must be positive");
  if (max_stored_response == 0) {
    return bad("max_stored_response must be positive");
  }
  if (replay_header_name.empty()) {
    return bad("replay_header_name must not be empty");
  }
  if (compression_level < 1 || compression_level > 19) {
    return bad("compression_level must be 1..19");
  }
  for (std::size_t i = 0; i < fingerprint_fields.size(); ++i) {
    if (auto why = internal::FingerprintFieldError(fingerprint_fields[i])) {
      return bad("fingerprint_fields[" + std::to_string(i) + "] \"" +
                 fingerprint_fields[i] + "\" is not a JSON pointer (" + *why +
                 ")");
    }
  }
  return {};
}

}  // namespace idem
