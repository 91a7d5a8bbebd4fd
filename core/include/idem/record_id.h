// The record id: the only form in which a client key reaches a store.
//
// Thread-safety: pure function.

#ifndef IDEM_RECORD_ID_H_
#define IDEM_RECORD_ID_H_

#include <string_view>

#include "idem/types.h"

namespace idem {

// SHA-256(u64be(len(scope)) || scope || key). The length prefix keeps
// ("ab","c") and ("a","bc") apart. Scope "" is the anonymous scope.
RecordId MakeRecordId(std::string_view scope, std::string_view key);

}  // namespace idem

#endif  // IDEM_RECORD_ID_H_
