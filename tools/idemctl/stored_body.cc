#include "stored_body.h"

#include <utility>

#include "idem/stored_response.h"

namespace idem::idemctl {

Result<ShownResponse> ShowStoredResponse(const Record& record,
                                         const RecordId& id,
                                         const ResponseKeyRing* keys) {
  const Response& stored = *record.response;
  ShownResponse shown;
  shown.stored_bytes = stored.body.size();
  shown.key_id = SealingKeyId(stored);
  const auto envelope = stored.FindHeader(kStoredResponseHeader);
  shown.compressed =
      envelope && (envelope->find("; zstd") != std::string::npos);
  if (shown.key_id && keys == nullptr) {
    shown.sealed_unread = true;
    shown.response.status = stored.status;
    return shown;
  }
  IDEM_ASSIGN_OR_RETURN(
      auto decoded, DecodeStoredResponse(stored, id, record.fingerprint, keys,
                                         kMaxShownBody));
  shown.response = std::move(decoded.response);
  return shown;
}

}  // namespace idem::idemctl
