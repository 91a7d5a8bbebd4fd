// The Guard's two points of contact with stored_response.h (response_seal.h).
#include "response_seal.h"

#include <exception>
#include <utility>

#include "idem/replay_info.h"

namespace idem::internal {

std::shared_ptr<const GuardOptions> WithClaimContext(
    std::shared_ptr<const GuardOptions> options, const Fingerprint& fp,
    TimePoint claimed_at) {
  const GuardOptions* raw = options.get();
  return std::shared_ptr<const GuardOptions>(
      raw, ClaimContext{std::move(options), fp, claimed_at});
}

const ClaimContext* ClaimContextOf(
    const std::shared_ptr<const GuardOptions>& options) {
  return std::get_deleter<ClaimContext>(options);
}

const ResponseKeyRing* KeysFor(const GuardOptions& route,
                               const GuardOptions& guard) {
  return route.response_keys ? route.response_keys.get()
                             : guard.response_keys.get();
}

Result<Response> ToStoredForm(
    const std::shared_ptr<const GuardOptions>& claim_options,
    const GuardOptions& guard_options, const RecordId& id, Response stored,
    TimePoint now) {
  const GuardOptions& route = *claim_options;
  const ClaimContext* context = ClaimContextOf(claim_options);
  StoredResponseSettings settings;
  settings.keys = KeysFor(route, guard_options);
  settings.compress_above = route.compress_stored_above;
  settings.compression_level = route.compression_level;
  const bool compresses = settings.compress_above > 0 &&
                          stored.body.size() > settings.compress_above;
  if (context == nullptr) {
    // A claim the Guard did not make (none exists today): without the
    // fingerprint nothing can be sealed, and storing in clear what should
    // be sealed is never the answer.
    if (settings.keys != nullptr) {
      return MakeError(ErrorCode::kInternal,
                       "the claim carries no fingerprint to seal with");
    }
    settings.compress_above = 0;
    return EncodeStoredResponse(stored, id, Fingerprint{}, settings);
  }
  if (settings.keys != nullptr || compresses || route.on_replay) {
    // The store computes expires_at from the same claim time and ttl.
    settings.times =
        StoredTimes{context->claimed_at, now, context->claimed_at + route.ttl};
  } else {
    // Stored as it is (EncodeStoredResponse would return a copy of it):
    // moved, not copied.
    return std::move(stored);
  }
  return EncodeStoredResponse(stored, id, context->fingerprint, settings);
}

Result<Response> ToReplay(const GuardOptions& route,
                          const GuardOptions& guard_options, const RecordId& id,
                          const Fingerprint& fp, const Response& stored,
                          std::optional<std::string>* hook_error) {
  DecodedStoredResponse decoded;
  Response& replay = decoded.response;
  if (!stored.FindHeader(kStoredResponseHeader)) {
    // Kept as it is sent (DecodeStoredResponse would copy it whole): copied
    // once, with room for the replay header.
    replay.status = stored.status;
    replay.headers.reserve(stored.headers.size() + 1);
    replay.headers = stored.headers;
    replay.body = stored.body;
  } else {
    IDEM_ASSIGN_OR_RETURN(
        decoded,
        DecodeStoredResponse(stored, id, fp, KeysFor(route, guard_options),
                             route.max_stored_response));
  }
  replay.headers.emplace_back(route.replay_header_name,
                              route.replay_header_value);
  if (!route.on_replay) return std::move(replay);
  ReplayInfo info;
  info.record_id = id;
  info.status = replay.status;
  if (decoded.times) {
    info.created_at = decoded.times->created_at;
    info.completed_at = decoded.times->completed_at;
    info.expires_at = decoded.times->expires_at;
  }
  // The hook edits a copy: one that throws half-way leaves nothing of its
  // edits in the replay.
  Headers headers = replay.headers;
  try {
    route.on_replay(info, headers);
    replay.headers = std::move(headers);
  } catch (const std::exception& e) {
    *hook_error = e.what();
  } catch (...) {
    *hook_error = "an exception that is not a std::exception";
  }
  return std::move(replay);
}

}  // namespace idem::internal
