// The rocksdb store's raw engine write for idem-bench (benchmarks/raw_ops.h):
// one rocksdb::DB::Put of a fresh 32-byte key into an `idempotency`
// column family with the store's options. Registered by idem_add_backend's
// BENCH_SOURCES.

#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "idem/error.h"
#include "idem/record.h"
#include "idem/rocksdb_store_options.h"
#include "idem/store/record_codec.h"
#include "idem/store_uri.h"
#include "raw_ops.h"
#include "rocksdb_options.h"

namespace idem::bench {
namespace {

class RocksdbRawOp final : public RawOp {
 public:
  static Result<std::unique_ptr<RawOp>> Open(StoreUri& uri) {
    auto sync = uri.TakeBool("sync");
    if (!sync) return tl::unexpected(sync.error());
    if (auto s = uri.RejectUnknown(); !s) return tl::unexpected(s.error());
    // The store's options for its records (rocksdb_options.h): the bloom
    // filters, the hash memtable. The database's are RocksDB's defaults but
    // for what the store sets that bears on a write.
    rocksdb::DBOptions db_options;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.keep_log_file_num = 4;
    db_options.max_background_jobs = 2;
    db_options.allow_concurrent_memtable_write = false;  // The hash memtable.
    const rocksdb::ColumnFamilyOptions cf_options =
        rocksdb_internal::RecordFamilyOptions(RocksdbStoreOptions{}, nullptr);
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    const rocksdb::Status s = rocksdb::DB::Open(
        db_options, uri.path(),
        {{rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
         {"idempotency", cf_options}},
        &handles, &db);
    if (!s.ok()) {
      return MakeError(ErrorCode::kUnavailable,
                       "raw rocksdb " + uri.redacted() + ": " + s.ToString());
    }
    auto op = std::unique_ptr<RocksdbRawOp>(new RocksdbRawOp());
    op->db_.reset(db);
    op->db_->DestroyColumnFamilyHandle(handles[0]);
    op->cf_ = handles[1];
    op->write_.sync = sync->value_or(false);
    op->value_ = EncodeRecord(BenchRecord(RecordState::kCompleted));
    return std::unique_ptr<RawOp>(std::move(op));
  }

  ~RocksdbRawOp() override {
    if (db_ == nullptr) return;
    db_->DestroyColumnFamilyHandle(cf_);
    db_->Close();
  }

  Status Write(const RecordId& id, int) override {
    const rocksdb::Status s =
        db_->Put(write_, cf_, rocksdb::Slice(id.view().data(), 32), value_);
    if (s.ok()) return {};
    return MakeError(ErrorCode::kUnavailable, "raw put: " + s.ToString());
  }

 private:
  RocksdbRawOp() = default;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* cf_ = nullptr;
  rocksdb::WriteOptions write_;
  std::string value_;
};

}  // namespace

const RawEngine& RocksdbRawEngine() {
  static const RawEngine engine{
      .schemes = {"rocksdb"},
      .open = [](StoreUri& uri, std::string_view full_uri,
                 int threads) -> Result<std::unique_ptr<RawOp>> {
        (void)full_uri;
        (void)threads;
        return RocksdbRawOp::Open(uri);
      }};
  return engine;
}

}  // namespace idem::bench
