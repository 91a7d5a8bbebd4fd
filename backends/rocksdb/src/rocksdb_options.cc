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
//
// Memtable: a hash of small skip lists (HashSkipListRep) keyed by the
// id's first two bytes, instead of RocksDB's one skip list. Ids are
// uniformly random, so every insert into the single list walked its full
// height through cache misses: with a 64 MiB memtable of about 100,000
// records that walk was a third of the store thread's CPU under the HTTP
// fresh-key load (benchmarks/http/NOTES.md). With 65,536 buckets a bucket
// holds one or two records; the store thread's CPU per request fell by
// half. What it costs:
// - Inserts into the memtable are not concurrent
//   (allow_concurrent_memtable_write = false): RocksDB's write group leader
//   inserts its followers' batches. The store's own thread does almost all
//   writes, so there is nothing to run in parallel.
// - A scan in key order (PurgeExpired, Stats) must ask for total order
//   (ScanOptions), and then RocksDB sorts the memtable's keys into a list
//   of their own for that iterator: about as long as building a skip list
//   of the memtable's records, once per PurgeExpired call.
// - The prefix extractor also puts the two-byte prefixes into the table
//   files' bloom filters (whole-key filtering stays on): a table file of
//   100,000 records holds up to 65,536 prefixes, so its filter is up to
//   about half larger.
// A shorter prefix (one byte, 256 buckets) saved nothing measurable; a
// longer one (eight bytes) saved about as much and doubles the filters.

#include "rocksdb_options.h"

#include <rocksdb/cache.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>

#include <cstddef>
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
  // The hash memtable (above) takes one inserting thread at a time.
  db_options.allow_concurrent_memtable_write = false;
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
  // The hash memtable (above). Capped: a key shorter than the prefix (none
  // of the store's, all 32 bytes) would still have one.
  cf_options.prefix_extractor.reset(
      rocksdb::NewCappedPrefixTransform(kMemtablePrefixBytes));
  cf_options.memtable_factory.reset(rocksdb::NewHashSkipListRepFactory(
      std::size_t{1} << (8 * kMemtablePrefixBytes)));
  return cf_options;
}

rocksdb::ReadOptions ScanOptions() {
  rocksdb::ReadOptions options;
  // Without it, a prefix extractor makes Seek find only the keys sharing
  // the target's prefix, in no defined order beyond them.
  options.total_order_seek = true;
  options.fill_cache = false;  // A full scan would evict hot records.
  return options;
}

}  // namespace rocksdb_internal

}  // namespace idem
