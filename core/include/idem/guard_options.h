// Configuration of a Guard, and of each protected route. A route that wants
// its own ttl, lock timeout or limits copies the guard's options, changes
// what differs and passes the copy with its requests.
//
// The `Default:` in each field's comment is the one statement of that
// default (with guard_setup.h and sweeper.h): SEMANTICS.md's "Configuration
// (defaults)" table is generated from it by scripts/gen_defaults.py, which
// takes the sentence that starts at `Default:`.
//
// Thread-safety: plain value; share it read-only (e.g. as
// shared_ptr<const GuardOptions>) between threads.

#ifndef IDEM_GUARD_OPTIONS_H_
#define IDEM_GUARD_OPTIONS_H_

#include <bitset>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/fingerprint.h"
#include "idem/response.h"

namespace idem {

// idem/response_keys.h: the keys that seal stored responses.
class ResponseKeyRing;
// idem/replay_info.h: what GuardOptions::on_replay is told of a replay.
struct ReplayInfo;

// A set of HTTP status codes 100..999.
class StatusSet {
 public:
  StatusSet() = default;
  // 200-499 except 408, 425 and 429: success and client errors are final;
  // timeouts, "too early", rate limits and 5xx are worth retrying.
  static StatusSet Default();
  StatusSet& AddRange(int first, int last);  // Inclusive.
  StatusSet& Add(int status) { return AddRange(status, status); }
  StatusSet& Remove(int status);
  bool Contains(int status) const {
    return status >= 0 && status < 1000 && bits_.test(status);
  }

 private:
  std::bitset<1000> bits_;
};

enum class StoreErrorPolicy {
  kFailClosed,  // 503 idempotency_store_unavailable; the handler does not run.
  kFailOpen,    // Run unprotected and skip the store for store_backoff.
};

enum class OversizePolicy {
  kReject,  // 413 request_too_large.
  kBypass,  // Run the handler unprotected.
};

enum class AnonymousPolicy {
  kShared,  // Anonymous requests share the scope "".
  kBypass,  // Anonymous requests with a key run unprotected, counted
            // anonymous_bypassed (metrics.h).
  kReject,  // Anonymous requests with a key: 401
            // idempotency_authentication_required.
};

// The largest durations Validate accepts. They keep every `now + duration`
// far inside TimePoint's range (int64 nanoseconds, about 292 years) and are
// far above any sensible setting, so a typo (a value in ms given as s, a
// wrapped integer) is refused instead of turned into a record that never
// expires or a lock that never times out.
inline constexpr Duration kMaxTtl = std::chrono::hours(24 * 365);
inline constexpr Duration kMaxLockTimeout = std::chrono::hours(24);
inline constexpr Duration kMaxLockWait = std::chrono::hours(1);
inline constexpr Duration kMaxRetryAfter = std::chrono::hours(24);
inline constexpr Duration kMaxStoreBackoff = std::chrono::hours(1);
inline constexpr Duration kMaxLockRenewalRetry = std::chrono::hours(1);

struct GuardOptions {
  // A request without Idempotency-Key gets 400 idempotency_key_missing when
  // true, or runs unprotected when false. Default: true.
  bool key_required = true;
  // Lifetime of a record from its claim. Default: 24 h. Maximum: 365 days
  // (kMaxTtl).
  Duration ttl = std::chrono::hours(24);
  // How long an in_progress record blocks others. Default: 60 s. Maximum:
  // 24 h (kMaxLockTimeout). A lock never outlives its record: a claim locks
  // until min(now + lock_timeout, now + ttl), so a lock_timeout above the
  // ttl is allowed and means "until the record expires".
  Duration lock_timeout = std::chrono::seconds(60);
  // Lock renewal for handlers that may run longer than lock_timeout: while
  // the handler runs, its claim's lock is extended (Store::ExtendLock) to
  // now + lock_timeout every lock_renewal, so a live handler is not taken
  // over while its renewals reach the store, while a crashed one is
  // lock_timeout after its last renewal. A store outage longer than
  // lock_timeout - lock_renewal lets the lock time out: a retry that
  // reaches the store before the holder's next renewal then takes the key
  // over (SEMANTICS.md, "Lock renewal"; the handler can see it coming,
  // ClaimHandle::lock_state). A renewal that finds the claim lost is logged
  // and counted (renewal_lost); the late Finish then ends as
  // kStaleComplete. Default: 0 (off: nothing is scheduled); must be below
  // lock_timeout.
  Duration lock_renewal = Duration::zero();
  // How soon a renewal that failed (a store error or timeout) is tried
  // again, counted from the failed call's start, instead of the next
  // lock_renewal: when the store answers again, the holder's renewal reaches
  // it at most this long after, which bounds how long a retry has to take
  // over a lock that timed out during the outage. At most lock_renewal is
  // used. One store call per running handler per lock_renewal_retry while
  // the store fails. Default: 50 ms (must be positive; at most lock_renewal
  // is used). Maximum: 1 h (kMaxLockRenewalRetry).
  Duration lock_renewal_retry = std::chrono::milliseconds(50);
  // When true, the operation is part of the record id (MakeRecordId(scope,
  // OperationName(method, route), key), record_id.h), so one client key used
  // on POST /orders and on POST /payments names two operations instead of
  // answering 422 on the second. The operation is the request's method and
  // the route *pattern* the adapter matched (RequestView::route; the
  // target's path without the query when the adapter gives none): requests
  // to "/orders/{id}" with different ids are one operation, and a key reused
  // across them is still a 422; an application that wants one operation per
  // resource registers one route per resource. Guard::BeginWithKey (RunOnce)
  // names the operation "CALL <operation>". Records written before the
  // option was switched on are not found after (nor the reverse): switching
  // it on a live route lets a retry of an earlier request run again.
  // Default: false (the key alone, with the scope, names the record).
  bool key_per_operation = false;
  // How long a request waits for an in_progress record to complete before
  // answering 409. Default: 0 (answer 409 at once). Maximum: 1 h
  // (kMaxLockWait).
  Duration lock_wait = Duration::zero();
  // Retry-After on 409 and 503 answers, rounded up to seconds. Default: 1 s
  // (0 omits the header). Maximum: 24 h (kMaxRetryAfter).
  Duration retry_after = std::chrono::seconds(1);
  // Longest key, in bytes after unquoting. Default: 255.
  std::size_t max_key_length = 255;
  // Largest request body that is fingerprinted. Default: 1 MiB. Must be
  // positive.
  std::size_t max_request_body = std::size_t{1} << 20;
  // What happens to a larger body. Default: kReject (413).
  OversizePolicy oversize_request = OversizePolicy::kReject;
  // Largest response body that is stored; a larger one is sent unstored and
  // its key released. Default: 1 MiB. Must be positive.
  std::size_t max_stored_response = std::size_t{1} << 20;
  // Response headers stored and replayed (case-insensitive). Content-Length
  // is always recomputed. Default: Content-Type, Content-Language,
  // Content-Encoding, Content-Disposition, Location, ETag (a replay of a
  // compressed body says it is compressed, a download keeps its file name).
  std::vector<std::string> stored_headers = {
      "Content-Type",        "Content-Language", "Content-Encoding",
      "Content-Disposition", "Location",         "ETag"};
  // Statuses whose responses are stored; others release the key. Default:
  // StatusSet::Default(), 200-499 except 408, 425 and 429.
  StatusSet stored_statuses = StatusSet::Default();
  // Request headers that are part of the fingerprint. Default: none.
  std::vector<std::string> fingerprint_headers;
  // How the body takes part in the fingerprint (fingerprint.h). Default:
  // kRaw (kJson canonicalizes JSON first, RFC 8785).
  BodyFingerprint fingerprint_body = BodyFingerprint::kRaw;
  // The JSON members that identify a request, as RFC 6901 JSON pointers
  // ("/amount", "/customer/id", "/items/0/sku"; "~0" and "~1" escape "~"
  // and "/"). When not empty, only these members of the body, canonicalized
  // (RFC 8785), take part in the fingerprint instead of the whole body (and
  // fingerprint_body is not used): a retry whose body differs elsewhere (a
  // client timestamp, a trace id) replays. A member that is absent hashes
  // as absent, distinct from null. A body that is not JSON (an empty one,
  // or one nested deeper than 512 levels) is refused before any store call:
  // 400 idempotency_body_not_json, counted kBodyNotJson. Why not hash it
  // raw, as fingerprint_body = kJson does: this route says that only the
  // named members identify a request, and a body without members cannot
  // be identified so; hashed raw, it would be identified by every byte,
  // and a retry differing in a timestamp would get 422 on a route meant to
  // replay it. The method, target and fingerprint_headers still take part.
  // Validate refuses a pointer that is not one (named). Default: none (the
  // whole body; the members are named by RFC 6901 pointers).
  std::vector<std::string> fingerprint_fields;
  // The keys that seal stored responses (AES-256-GCM, response_keys.h):
  // when set, every response this route stores is sealed with the ring's
  // first key and opened with any of its keys, with the record id and the
  // fingerprint as associated data; a stored response that cannot be opened
  // answers 500 idempotency_record_damaged. A route whose own options leave
  // it null uses the guard's (GuardSetup::options), so setting it there
  // seals on every route of the guard, whatever the store. Default: null
  // (not sealed: responses are stored as the handler gave them; a route
  // without its own uses the guard's).
  std::shared_ptr<const ResponseKeyRing> response_keys;
  // Stored responses whose body is larger than this many bytes are stored
  // zstd-compressed (before sealing); replays decompress them. 0 turns
  // compression off. max_stored_response applies to the uncompressed body.
  // Default: 1 KiB (0 = never).
  std::size_t compress_stored_above = 1024;
  // The zstd level. Default: 3 (1..19).
  int compression_level = 3;
  // Called with every replay of a stored response before it is sent, on the
  // thread that made the decision: may add, change or remove the replay's
  // headers (the replay header is already among them), e.g. an expiry
  // header from the record's times (ReplayInfo). If it throws, the replay
  // is sent as it was before the call and the error is logged. A record
  // stored plain (no sealing, no compression and no hook on its route at
  // the time) carries no times: ReplayInfo says which are known. Default:
  // none.
  std::function<void(const ReplayInfo&, Headers&)> on_replay;
  // Added to every replay. Default: "Idempotent-Replayed: true".
  std::string replay_header_name = "Idempotent-Replayed";
  std::string replay_header_value = "true";
  // What this route does when the store is unreachable (a claim returned
  // kUnavailable). Default: kFailClosed. Only a kFailOpen route runs
  // unprotected, and only kFailOpen routes then skip the store for
  // store_backoff; a kFailClosed route on the same Guard always asks the
  // store. Other claim errors never fail open: kDataLoss (a damaged record)
  // answers 500 idempotency_record_damaged, kResourceExhausted 503
  // idempotency_store_full, kInvalidArgument and kInternal 503
  // idempotency_store_unavailable, on every route and without a back-off.
  StoreErrorPolicy on_store_error = StoreErrorPolicy::kFailClosed;
  // How long kFailOpen routes skip the store after a claim found it
  // unreachable. Default: 10 s. Maximum: 1 h (kMaxStoreBackoff).
  Duration store_backoff = std::chrono::seconds(10);
  // Requests without a resolvable scope. Default: kShared (the scope ""; or
  // kBypass, or kReject: 401, only for requests with a key). The policy
  // applies to requests that carry a key (step 1c): a request without a key
  // is step 1 (400 idempotency_key_missing on a key-required route) or step
  // 1b (passes through on a key-optional route) under every policy, so with
  // kBypass an anonymous request on a key-required route still needs a key,
  // and then runs unprotected (nothing stored, the key not even parsed).
  AnonymousPolicy anonymous = AnonymousPolicy::kShared;
  // The `type` member of problem bodies. Default: "about:blank".
  std::string problem_type = "about:blank";

  // kInvalidArgument naming the first bad field: a ttl or lock_timeout that
  // is not positive, a negative wait or lock_renewal, a lock_renewal not
  // below lock_timeout, a lock_renewal_retry that is not positive, a
  // duration over its maximum (above),
  // a zero max_key_length, max_request_body or
  // max_stored_response, an empty replay header name, a fingerprint field
  // that is not a JSON pointer, a compression_level outside 1..19.
  // Guard::Create and
  // Guard::MakeRouteOptions call it; Begin refuses a route that fails it.
  Status Validate() const;
};

}  // namespace idem

#endif  // IDEM_GUARD_OPTIONS_H_
