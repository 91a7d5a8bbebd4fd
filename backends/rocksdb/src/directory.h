// The RocksDB store's database directory before RocksDB opens it.

#ifndef IDEM_BACKENDS_ROCKSDB_DIRECTORY_H_
#define IDEM_BACKENDS_ROCKSDB_DIRECTORY_H_

#include <string>

#include "idem/error.h"

namespace idem::rocksdb_internal {

// Creates `path` (and missing parents) unless it exists. Errors:
// kInvalidArgument when it is not a directory, or holds other files but no
// RocksDB database (the message names one of them); kUnavailable when it
// cannot be created.
Status PrepareDirectory(const std::string& path);

}  // namespace idem::rocksdb_internal

#endif  // IDEM_BACKENDS_ROCKSDB_DIRECTORY_H_
