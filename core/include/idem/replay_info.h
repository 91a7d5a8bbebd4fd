// ReplayInfo: what GuardOptions::on_replay is told of the replay it may
// adjust.
//
// Thread-safety: plain value, valid for the duration of the call.

#ifndef IDEM_REPLAY_INFO_H_
#define IDEM_REPLAY_INFO_H_

#include <optional>

#include "idem/clock.h"
#include "idem/types.h"

namespace idem {

struct ReplayInfo {
  RecordId record_id;
  // The replayed status.
  int status = 0;
  // The record's times, by the Guard's clock: when the request that
  // completed it claimed the key, when it completed, and when the record
  // expires (created_at + the route's ttl; later retries run again). All
  // three are known for a record stored sealed, compressed or by a route
  // with on_replay, and none for a record stored plain (stored_response.h).
  std::optional<TimePoint> created_at;
  std::optional<TimePoint> completed_at;
  std::optional<TimePoint> expires_at;
};

}  // namespace idem

#endif  // IDEM_REPLAY_INFO_H_
