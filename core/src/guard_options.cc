#include "idem/guard_options.h"

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

Status GuardOptions::Validate() const {
  auto bad = [](const char* what) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("invalid guard option: ") + what);
  };
  if (ttl <= Duration::zero()) return bad("ttl must be positive");
  if (lock_timeout <= Duration::zero()) {
    return bad("lock_timeout must be positive");
  }
  if (lock_wait < Duration::zero())
    return bad("lock_wait must not be negative");
  if (retry_after < Duration::zero()) {
    return bad("retry_after must not be negative");
  }
  if (store_backoff < Duration::zero()) {
    return bad("store_backoff must not be negative");
  }
  if (max_key_length == 0) return bad("max_key_length must be positive");
  if (replay_header_name.empty()) {
    return bad("replay_header_name must not be empty");
  }
  return {};
}

}  // namespace idem
