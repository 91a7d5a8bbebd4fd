// The record id: the only form in which a client key reaches a store.
//
// Thread-safety: pure function.

#ifndef IDEM_RECORD_ID_H_
#define IDEM_RECORD_ID_H_

#include <string>
#include <string_view>

#include "idem/types.h"

namespace idem {

// SHA-256(u64be(len(scope)) || scope || key). The length prefix keeps
// ("ab","c") and ("a","bc") apart. Scope "" is the anonymous scope.
RecordId MakeRecordId(std::string_view scope, std::string_view key);

// The record id of a key used with key_per_operation: SHA-256(u64be(len(
// scope)) || scope || u64be(len(operation)) || operation || key), so the
// same key names a different record per operation, and never the record
// MakeRecordId(scope, key) names. `operation` is OperationName's.
RecordId MakeRecordId(std::string_view scope, std::string_view operation,
                      std::string_view key);

// "METHOD route", e.g. "POST /orders/{id}": the route pattern the
// application protected, not the request's path, so that all requests to
// one route are one operation.
std::string OperationName(std::string_view method, std::string_view route);

}  // namespace idem

#endif  // IDEM_RECORD_ID_H_
