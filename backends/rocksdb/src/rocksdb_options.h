// The RocksDB options the store opens its database with: one function per
// RocksDB options struct, so the tuning is in one place (rocksdb_options.cc;
// RocksdbStore::OpenFromUri is in rocksdb_store_uri.cc).

#ifndef IDEM_BACKENDS_ROCKSDB_ROCKSDB_OPTIONS_H_
#define IDEM_BACKENDS_ROCKSDB_ROCKSDB_OPTIONS_H_

#include <rocksdb/compaction_filter.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>

#include <memory>
#include <string>

#include "idem/rocksdb_store_options.h"

namespace idem::rocksdb_internal {

// For the database at `path` (which must exist: its info LOG is opened
// here), reporting background errors to `listener`; creating the database
// and the record column family if missing when `create` is true.
rocksdb::DBOptions DatabaseOptions(
    const std::string& path, std::shared_ptr<rocksdb::EventListener> listener,
    bool create);

// For the record column family; `filter` must outlive the database.
rocksdb::ColumnFamilyOptions RecordFamilyOptions(
    const RocksdbStoreOptions& options,
    const rocksdb::CompactionFilter* filter);

}  // namespace idem::rocksdb_internal

#endif  // IDEM_BACKENDS_ROCKSDB_ROCKSDB_OPTIONS_H_
