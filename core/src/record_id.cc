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

RecordId MakeRecordId(std::string_view scope, std::string_view operation,
                      std::string_view key) {
  thread_local FingerprintBuilder builder;
  builder.Reset();
  builder.AddField(scope);
  builder.AddField(operation);
  builder.AddRaw(key);
  RecordId id;
  id.bytes = builder.Finish();
  return id;
}

std::string OperationName(std::string_view method, std::string_view route) {
  std::string name;
  name.reserve(method.size() + 1 + route.size());
  name.append(method).append(" ").append(route);
  return name;
}

}  // namespace idem
