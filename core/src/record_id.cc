// Record ids: the only form in which a client key reaches a store.

#include "idem/record_id.h"

#include "idem/fingerprint.h"

namespace idem {

RecordId MakeRecordId(std::string_view scope, std::string_view key) {
  // Its own per-thread builder: the same fetched EVP_MD and a reused context
  // as the fingerprint, so an id costs one digest init and no allocation.
  thread_local FingerprintBuilder builder;
  builder.Reset();
  builder.AddField(scope);  // u64be(len(scope)) || scope
  builder.AddRaw(key);      // The key is last, so it needs no prefix.
  RecordId id;
  id.bytes = builder.Finish();
  return id;
}

}  // namespace idem
