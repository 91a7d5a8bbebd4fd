// How idemctl prints what it read: times, bytes that may not be text.
//
// Thread-safety: pure functions.

#ifndef IDEM_TOOLS_IDEMCTL_RENDER_H_
#define IDEM_TOOLS_IDEMCTL_RENDER_H_

#include <string>
#include <string_view>

#include "idem/clock.h"

namespace idem::idemctl {

// ISO-8601 in UTC with milliseconds (truncated): "2026-12-02T01:30:00.123Z".
std::string IsoUtc(TimePoint t);

// `bytes` safe for a terminal: printable ASCII (0x20-0x7E) as is except
// '\\' and '"', which are escaped with a backslash; \n, \r, \t as such;
// every other byte as \xNN. Reversible, and never a control byte.
std::string Escape(std::string_view bytes);

// Standard base64 (RFC 4648, with padding) of `bytes`.
std::string Base64(std::string_view bytes);

// Whether `text` is a record id: exactly 64 hex digits (either case).
bool IsRecordIdHex(std::string_view text);

}  // namespace idem::idemctl

#endif  // IDEM_TOOLS_IDEMCTL_RENDER_H_
