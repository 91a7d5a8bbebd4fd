// The record a store keeps per RecordId (SEMANTICS.md, "Terms").
//
// Thread-safety: plain value. The response is shared and immutable so that a
// store can hand the same stored body to many concurrent replays without
// copying it.

#ifndef IDEM_RECORD_H_
#define IDEM_RECORD_H_

#include <memory>
#include <string_view>

#include "idem/clock.h"
#include "idem/response.h"
#include "idem/types.h"

namespace idem {

enum class RecordState : std::uint8_t {
  // The first request holds the key; others get InProgress until
  // `locked_until`, after which the key can be taken over.
  kInProgress = 1,
  // The first request's response is stored; same-fingerprint retries replay
  // it until `expires_at`.
  kCompleted = 2,
};

std::string_view RecordStateName(RecordState state);

struct Record {
  RecordState state = RecordState::kInProgress;
  Fingerprint fingerprint;
  Token token;
  // min(claim time + lock timeout, expires_at).
  TimePoint locked_until;
  // claim time + ttl; at or after it the record counts as absent.
  TimePoint expires_at;
  // Set exactly when state == kCompleted.
  std::shared_ptr<const Response> response;

  bool Expired(TimePoint now) const { return expires_at <= now; }
  // Whether `holder` owns this record's claim: in progress under its token.
  // Complete, Release and renewal act only on a record their token holds.
  bool HeldBy(const Token& holder) const {
    return state == RecordState::kInProgress && token == holder;
  }

  friend bool operator==(const Record& a, const Record& b);
};

}  // namespace idem

#endif  // IDEM_RECORD_H_
