// The steps of the Redis store's Claim and Complete that the synchronous
// calls (redis_store.cc, over pooled connections) and the asynchronous
// ones (redis_async_calls.h, over the loop's connection) share: what a
// claim writes and sends, how its replies are decoded and decided, what a
// completion writes and how its script's verdict reads. Only the way the
// commands travel differs between the two paths; every decision and every
// error is made here, once.
//
// Why a claim is a plain command: on Redis a script's fixed cost is most of
// a claim. Measured with INFO commandstats (8 clients, fresh keys), the
// former claim script (EXISTS, a seven-field HSET, PEXPIRE: each
// redis.call goes through a fake client) took 6.7 us of server time per
// call against 2.8 us for SET NX PX, on a round trip of about 10 us, so a
// claim could not stay within 1.5x of the raw write (issue #11). SET key
// value NX GET PX ttl costs what SET NX PX does: it claims a free key (the
// common case) and returns the value in the way otherwise, on which C++
// decides with ClaimBlockedBy, on exact nanoseconds. Only a record that
// no longer blocks (expired, or its lock timed out) is replaced by a
// script, a compare-and-set on the header read, so that two claims over
// the same old record cannot both win. That is why a record is one string
// value (the codec's bytes) and not a hash: SET NX GET claims strings, and
// the scripts that remain need only its 67-byte header.
//
// Why a Redis TTL of expires_at - now rather than PEXPIREAT expires_at:
// records' times are on the caller's clock, which is the system clock in
// production (where both are the same up to clock skew between the
// application's hosts and Redis, which the relative form is immune to)
// but a ManualClock years in the past in tests, where an absolute expiry
// would delete every record at once.
//
// Thread-safety: pure functions, except Acquired, which writes the memo
// (itself safe for concurrent use).

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_CALLS_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_CALLS_H_

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/store/claim_memo.h"
#include "idem/types.h"
#include "redis_connection.h"

namespace idem::redis {

// What one claim writes (NewClaimRecord's record) and where.
struct ClaimPlan {
  Record fresh;
  std::string value;   // EncodeRecord(fresh).
  std::string ttl_ms;  // TtlMs: "0" is no TTL.
  std::string key;
  // SET key value NX GET [PX ttl_ms]: views into this plan.
  Command Set() const;
};

ClaimPlan PlanClaim(std::string key, const Fingerprint& fp, TimePoint now,
                    Duration ttl, Duration lock_timeout);

// Whether a SET's failure asks for a GET instead: a full server (-OOM)
// refuses every SET, even one that would not write (redis_store.h).
inline bool SetRefusedAsFull(const Result<Reply>& reply) {
  return !reply && reply.error().code() == ErrorCode::kResourceExhausted;
}

// A SET ... GET's or a GET's reply: the value found, or nullopt (nil).
// Errors: the reply's (a key of another type: kDataLoss naming `id`),
// kInternal for a reply of another type.
Result<std::optional<std::string>> FoundValue(const RecordId& id,
                                              std::string_view display,
                                              Result<Reply> reply);

// What a claim does once its SET found `found` (nullopt: it set the key).
enum class ClaimStep {
  kAcquired,  // Free, or this very claim's value (its own SET, resent).
  kAnswered,  // `answer`: the record in the way blocks it, or is damaged.
  kReclaim,   // `existing` no longer blocks: replace it (ReclaimArgs).
};
ClaimStep AfterSet(const RecordId& id, std::string_view display,
                   const ClaimPlan& plan,
                   const std::optional<std::string>& found,
                   const Fingerprint& fp, TimePoint now,
                   std::optional<Result<ClaimResult>>& answer,
                   Record& existing);

// The reclaim script's ARGV for the value `found` in the way.
std::array<std::string_view, 3> ReclaimArgs(const ClaimPlan& plan,
                                            std::string_view found);

// Whether the reclaim script replaced the record (1); else the claim
// starts again.
bool Reclaimed(const redisReply& reply);

// kAcquired for `plan`'s record, remembered in `memo` for the Complete.
ClaimResult Acquired(ClaimMemo& memo, const RecordId& id, const ClaimPlan& plan,
                     bool takeover);

// The answer of a claim that lost every race (store.h): kInProgress with
// locked_until = now.
ClaimResult LostEveryRace(TimePoint now);

// The fields of the claim `token` holds on `record`, or nullopt when it
// does not hold it (Complete returns false).
std::optional<ClaimFields> HeldFields(const RecordId& id, const Record& record,
                                      const Token& token);

// The complete script's ARGV[2]: the completed record of `fields` with
// `response`, then a fresh call id (so that a resend recognises its own
// write).
std::string CompletionValue(const ClaimFields& fields, const Token& token,
                            const Response& response);

// The complete script's verdict.
enum class CompleteVerdict { kCompleted, kNotHeld, kVanished };
CompleteVerdict VerdictOf(const redisReply& reply);

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_CALLS_H_
