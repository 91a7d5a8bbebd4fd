// idem-demo's stored-response features: the key file (--response-keys), the
// JSON members that identify an order (--fingerprint-fields) and the
// X-Idempotency-Expires header its replays carry (GuardOptions::on_replay).
//
// Thread-safety: pure functions; ReplayExpiresHeader may run on any thread.

#ifndef IDEM_DEMO_STORED_RESPONSES_H_
#define IDEM_DEMO_STORED_RESPONSES_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/replay_info.h"
#include "idem/response.h"
#include "idem/response_keys.h"

namespace idem::demo {

// --response-keys FILE: ResponseKeyRing::LoadFile, its errors prefixed with
// the flag (never a key: the ring's messages name line numbers only).
Result<std::shared_ptr<const ResponseKeyRing>> LoadResponseKeysFlag(
    const std::string& path);

// --fingerprint-fields /item,/customer/id: the comma-separated JSON
// pointers, each checked as GuardOptions::Validate does. kInvalidArgument
// naming the flag and the first bad pointer, or an empty list.
Result<std::vector<std::string>> ParseFingerprintFieldsFlag(
    std::string_view text);

// "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 IMF-fixdate), whatever the
// process's locale.
std::string ImfFixdate(TimePoint t);

// The demo's on_replay: adds X-Idempotency-Expires (IMF-fixdate of the
// record's expires_at) when the record carries its times.
void AddReplayExpiresHeader(const ReplayInfo& info, Headers& headers);

}  // namespace idem::demo

#endif  // IDEM_DEMO_STORED_RESPONSES_H_
