// The RocksDB options the store opens its database with: one function per
// RocksDB options struct, so the tuning is in one place (rocksdb_options.cc;
// RocksdbStore::OpenFromUri is in rocksdb_store_uri.cc).

#ifndef IDEM_BACKENDS_ROCKSDB_ROCKSDB_OPTIONS_H_
#define IDEM_BACKENDS_ROCKSDB_ROCKSDB_OPTIONS_H_

#include <rocksdb/compaction_filter.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>

#include <cstddef>
#include <memory>
#include <string>

#include "idem/rocksdb_store_options.h"

namespace idem::rocksdb_internal {

// The record column family's memtable is a hash of skip lists keyed by
// this many leading bytes of the id (rocksdb_options.cc says why).
inline constexpr std::size_t kMemtablePrefixBytes = 2;

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

// For a scan of the record column family in key order (PurgeExpired,
// Stats): total order across the memtable's buckets, and the block cache
// left to the records claims read.
rocksdb::ReadOptions ScanOptions();

}  // namespace idem::rocksdb_internal

#endif  // IDEM_BACKENDS_ROCKSDB_ROCKSDB_OPTIONS_H_
