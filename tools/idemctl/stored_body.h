// What `idemctl inspect` shows of a completed record's stored response: the
// response itself when it is plain, compressed, or sealed and opened with
// --response-keys; only its status and key id when it is sealed and no keys
// were given (stored_response.h has the format).
//
// Thread-safety: pure function.

#ifndef IDEM_TOOLS_IDEMCTL_STORED_BODY_H_
#define IDEM_TOOLS_IDEMCTL_STORED_BODY_H_

#include <cstddef>
#include <optional>
#include <string>

#include "idem/error.h"
#include "idem/record.h"
#include "idem/response.h"
#include "idem/response_keys.h"
#include "idem/types.h"

namespace idem::idemctl {

// The largest payload inspect decompresses: far above any
// max_stored_response, and a bound on what a damaged frame can claim.
inline constexpr std::size_t kMaxShownBody = std::size_t{256} << 20;

struct ShownResponse {
  // The response as the application sent it (status, stored headers,
  // body); with sealed_unread only its status is known.
  Response response;
  // Sealed and not opened (no --response-keys): headers and body unknown.
  bool sealed_unread = false;
  // The key that sealed it, when sealed.
  std::optional<std::string> key_id;
  // Stored zstd-compressed.
  bool compressed = false;
  // The stored body's size (compressed and sealed, when it is).
  std::size_t stored_bytes = 0;
};

// `record`'s response (completed, with one) as inspect shows it, opened
// with `keys` when given. kDataLoss when it cannot be opened or decoded
// (the message names the key id, never a key).
Result<ShownResponse> ShowStoredResponse(const Record& record,
                                         const RecordId& id,
                                         const ResponseKeyRing* keys);

}  // namespace idem::idemctl

#endif  // IDEM_TOOLS_IDEMCTL_STORED_BODY_H_
