// See redis_calls.h.

#include "redis_calls.h"

#include <utility>

#include "idem/store/record_codec.h"
#include "idem/token.h"
#include "redis_record.h"

namespace idem::redis {

Command ClaimPlan::Set() const {
  Command set = {"SET", key, value, "NX", "GET"};
  if (ttl_ms != "0") set.insert(set.end(), {"PX", ttl_ms});
  return set;
}

ClaimPlan PlanClaim(std::string key, const Fingerprint& fp, TimePoint now,
                    Duration ttl, Duration lock_timeout) {
  ClaimPlan plan;
  plan.fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
  plan.value = EncodeRecord(plan.fresh);
  plan.ttl_ms = TtlMs(now, plan.fresh.expires_at);
  plan.key = std::move(key);
  return plan;
}

Result<std::optional<std::string>> FoundValue(const RecordId& id,
                                              std::string_view display,
                                              Result<Reply> reply) {
  IDEM_ASSIGN_OR_RETURN(Reply r, OfRecord(id, display, std::move(reply)));
  return ValueOf(*r, display);
}

ClaimStep AfterSet(const RecordId& id, std::string_view display,
                   const ClaimPlan& plan,
                   const std::optional<std::string>& found,
                   const Fingerprint& fp, TimePoint now,
                   std::optional<Result<ClaimResult>>& answer,
                   Record& existing) {
  // A token is new for every claim: a value byte for byte this claim's is
  // its own SET, resent after the reply was lost.
  if (!found || *found == plan.value) return ClaimStep::kAcquired;
  Result<Record> decoded = DecodeValue(id, display, *found);
  if (!decoded) {
    answer = tl::unexpected(std::move(decoded.error()));
    return ClaimStep::kAnswered;
  }
  if (auto blocked = ClaimBlockedBy(*decoded, fp, now)) {
    answer = std::move(*blocked);
    return ClaimStep::kAnswered;
  }
  existing = std::move(*decoded);
  return ClaimStep::kReclaim;
}

std::array<std::string_view, 3> ReclaimArgs(const ClaimPlan& plan,
                                            std::string_view found) {
  return {Header(found), plan.value, plan.ttl_ms};
}

bool Reclaimed(const redisReply& reply) { return IntegerReply(reply) == 1; }

ClaimResult Acquired(ClaimMemo& memo, const RecordId& id, const ClaimPlan& plan,
                     bool takeover) {
  const Record& fresh = plan.fresh;
  memo.Remember(fresh.token,
                {id, fresh.fingerprint, fresh.locked_until, fresh.expires_at});
  return ClaimAcquired(fresh, takeover);
}

ClaimResult LostEveryRace(TimePoint now) {
  ClaimResult busy;
  busy.outcome = ClaimOutcome::kInProgress;
  busy.locked_until = now;
  return busy;
}

std::optional<ClaimFields> HeldFields(const RecordId& id, const Record& record,
                                      const Token& token) {
  if (!record.HeldBy(token)) return std::nullopt;
  return ClaimFields{id, record.fingerprint, record.locked_until,
                     record.expires_at};
}

std::string CompletionValue(const ClaimFields& fields, const Token& token,
                            const Response& response) {
  const Record held{.state = RecordState::kInProgress,
                    .fingerprint = fields.fingerprint,
                    .token = token,
                    .locked_until = fields.locked_until,
                    .expires_at = fields.expires_at};
  std::string value = EncodeCompleted(held, response);
  value += NewToken().view();
  return value;
}

CompleteVerdict VerdictOf(const redisReply& reply) {
  switch (IntegerReply(reply)) {
    case 1:
      return CompleteVerdict::kCompleted;
    case 3:
      return CompleteVerdict::kVanished;
    default:
      return CompleteVerdict::kNotHeld;
  }
}

}  // namespace idem::redis
