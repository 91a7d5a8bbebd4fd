// The store's RocksDB tuning.
//
// Block cache: the store's own LRU cache instead of RocksDB's implicit
// 8 MiB one, so that its size is the operator's choice. The default of
// 64 MiB is chosen so that the hot records of a busy server (the ones
// clients retry, i.e. replays) are served from memory: 8 MiB holds only a
// few percent of a table of a million records with small responses, and a
// replay that misses the cache reads its data block from the OS page cache
// (or disk), with a checksum, on every Get.
//
// Index and filter blocks stay out of the cache (RocksDB's default): each
// table reader keeps them in memory while its file is open, so the bloom
// check that answers most claims (fresh ids) costs no cache lookup and is
// never evicted by replayed data blocks. Caching them, with high priority
// and L0 pinning, would bound that memory but put a cache lookup in front of
// every bloom check; that was not measured against claim latency, so the
// layout the benchmarks were run with stays.

#include "rocksdb_options.h"

#include <rocksdb/cache.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>

#include <limits>
#include <utility>

#include "rocksdb_info_log.h"

namespace idem {
namespace rocksdb_internal {

rocksdb::DBOptions DatabaseOptions(
    const std::string& path, std::shared_ptr<rocksdb::EventListener> listener,
    bool create) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = create;
  db_options.create_missing_column_families = create;
  // RocksDB's own info LOG: keep a few, not one per open forever. Written
  // by a logger that a full disk cannot turn into an abort
  // (rocksdb_info_log.h).
  db_options.keep_log_file_num = 4;
  db_options.info_log = InfoLog::Open(path, rocksdb::InfoLogLevel::INFO_LEVEL);
  db_options.listeners.push_back(std::move(listener));
  db_options.max_background_jobs = 2;
  return db_options;
}

rocksdb::ColumnFamilyOptions RecordFamilyOptions(
    const RocksdbStoreOptions& options,
    const rocksdb::CompactionFilter* filter) {
  rocksdb::ColumnFamilyOptions cf_options;
  cf_options.compaction_filter = filter;
  rocksdb::BlockBasedTableOptions table;
  // Most claims are for new ids: a bloom filter answers "absent" without
  // reading a data block.
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  // 0 turns the cache off, since a null block_cache alone would get the
  // implicit one back.
  if (options.block_cache_mb == 0) {
    table.no_block_cache = true;
  } else {
    table.block_cache = rocksdb::NewLRUCache(options.block_cache_mb << 20);
  }
  cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  // The same for the memtable, where a fresh id's Get would otherwise walk
  // the skip list to its end.
  cf_options.memtable_whole_key_filtering = true;
  cf_options.memtable_prefix_bloom_size_ratio = 0.05;
  return cf_options;
}

}  // namespace rocksdb_internal

}  // namespace idem
