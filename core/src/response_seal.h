// Private to core: where the Guard turns a response into its stored form
// (ClaimHandle::Finish and StorableResponse) and a stored response back into
// a replay (Guard::Claim, kCompleted), with the route's sealing keys,
// compression and replay hook (GuardOptions; stored_response.h has the
// format).
#ifndef IDEM_CORE_SRC_RESPONSE_SEAL_H_
#define IDEM_CORE_SRC_RESPONSE_SEAL_H_

#include <memory>
#include <optional>
#include <string>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/guard_options.h"
#include "idem/response.h"
#include "idem/stored_response.h"
#include "idem/types.h"

namespace idem::internal {

// What a claim must remember for its completion beyond ClaimHandle's
// fields: the fingerprint (the sealed response's associated data) and when
// it claimed (the record's times). It travels as the deleter of the
// claim's options pointer (WithClaimContext), so ClaimHandle needs no new
// member; the deleter deletes nothing and keeps the route's options alive.
struct ClaimContext {
  std::shared_ptr<const GuardOptions> options;
  Fingerprint fingerprint;
  TimePoint claimed_at;
  void operator()(const GuardOptions*) const {}
};

std::shared_ptr<const GuardOptions> WithClaimContext(
    std::shared_ptr<const GuardOptions> options, const Fingerprint& fp,
    TimePoint claimed_at);

// The context WithClaimContext attached, or nullptr.
const ClaimContext* ClaimContextOf(
    const std::shared_ptr<const GuardOptions>& options);

// The ring that seals and opens on `route`: its own, else the guard's.
const ResponseKeyRing* KeysFor(const GuardOptions& route,
                               const GuardOptions& guard);

// The stored form of `stored` (the response as Finish keeps it: status,
// listed headers, body) for the claim whose options are `claim_options`,
// completing at `now`. kInternal when sealing or compression fails; the
// response must then not be stored.
Result<Response> ToStoredForm(
    const std::shared_ptr<const GuardOptions>& claim_options,
    const GuardOptions& guard_options, const RecordId& id, Response stored,
    TimePoint now);

// The replay of `stored` on `route`: decoded (kDataLoss when it cannot be),
// the replay header added, then the route's on_replay hook. When the hook
// throws, the replay is the one before the call and *hook_error says why.
Result<Response> ToReplay(const GuardOptions& route,
                          const GuardOptions& guard_options, const RecordId& id,
                          const Fingerprint& fp, const Response& stored,
                          std::optional<std::string>* hook_error);

}  // namespace idem::internal

#endif  // IDEM_CORE_SRC_RESPONSE_SEAL_H_
