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
// With `create` false (RocksdbStoreOptions::create) it only checks, reading
// and writing nothing but RocksDB's CURRENT and MANIFEST: kUnavailable
// naming what is missing when `path` does not exist, is not a directory,
// holds no RocksDB database (no CURRENT file, e.g. an empty directory) or
// one without the record column family `family`.
Status PrepareDirectory(const std::string& path, bool create,
                        const std::string& family);

}  // namespace idem::rocksdb_internal

#endif  // IDEM_BACKENDS_ROCKSDB_DIRECTORY_H_
