// See raw_ops.h. Each engine's part compiles only when this build has the
// backend (IDEM_BENCH_HAVE_<BACKEND>), like OpenStore itself.

#include "raw_ops.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "idem/open_store.h"
#include "idem/record.h"
#include "idem/record_codec.h"
#include "idem/response.h"
#include "idem/store_uri.h"
#include "run_store.h"

#ifdef IDEM_BENCH_HAVE_ROCKSDB
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#endif
#ifdef IDEM_BENCH_HAVE_SQLITE
#include <sqlite3.h>
#endif
#ifdef IDEM_BENCH_HAVE_POSTGRES
#include <libpq-fe.h>
#endif
#ifdef IDEM_BENCH_HAVE_REDIS
#include "idem/redis_store.h"
#endif

namespace idem::bench {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

// A record as a claim (in progress) or a completion (with BenchResponse())
// leaves it, at kStart with a 24 h ttl and a 60 s lock.
Record BenchRecord(RecordState state) {
  Record r;
  r.state = state;
  r.fingerprint = BenchFingerprint();
  r.locked_until = kStart + seconds(60);
  r.expires_at = kStart + hours(24);
  if (state == RecordState::kCompleted) {
    r.response = std::make_shared<const Response>(BenchResponse());
  }
  return r;
}

// Opening the store creates its schema (SQLite's table, PostgreSQL's table
// and version row), so the raw side writes into exactly the store's layout.
Status CreateSchema(std::string_view uri) {
  auto store = OpenStore(uri);
  if (!store) return tl::unexpected(store.error());
  return {};
}

#ifdef IDEM_BENCH_HAVE_ROCKSDB
class RocksdbRawOp final : public RawOp {
 public:
  static Result<std::unique_ptr<RawOp>> Open(StoreUri& uri) {
    auto sync = uri.TakeBool("sync");
    if (!sync) return tl::unexpected(sync.error());
    if (auto s = uri.RejectUnknown(); !s) return tl::unexpected(s.error());
    // The store's options (rocksdb_store.cc): a bloom filter on the table
    // files and on the memtable, records in their own column family.
    rocksdb::DBOptions db_options;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    db_options.keep_log_file_num = 4;
    db_options.max_background_jobs = 2;
    rocksdb::ColumnFamilyOptions cf_options;
    rocksdb::BlockBasedTableOptions table;
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    cf_options.memtable_whole_key_filtering = true;
    cf_options.memtable_prefix_bloom_size_ratio = 0.05;
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
#endif  // IDEM_BENCH_HAVE_ROCKSDB

#ifdef IDEM_BENCH_HAVE_SQLITE
class SqliteRawOp final : public RawOp {
 public:
  static Result<std::unique_ptr<RawOp>> Open(StoreUri& uri,
                                             std::string_view full_uri,
                                             int threads) {
    auto sync = uri.TakeEnum("synchronous", {"off", "normal", "full", "extra"});
    if (!sync) return tl::unexpected(sync.error());
    auto busy =
        uri.TakeDuration("busy_timeout_ms", std::chrono::milliseconds(0),
                         std::chrono::milliseconds(3'600'000));
    if (!busy) return tl::unexpected(busy.error());
    uri.TakeString("sweep_interval_s");  // The store's; no raw meaning.
    if (auto s = uri.RejectUnknown(); !s) return tl::unexpected(s.error());
    if (auto s = CreateSchema(full_uri); !s) return tl::unexpected(s.error());
    const std::string pragma =
        "PRAGMA synchronous = " + sync->value_or("normal");
    auto op = std::unique_ptr<SqliteRawOp>(new SqliteRawOp());
    op->value_ = EncodeRecord(BenchRecord(RecordState::kCompleted));
    for (int t = 0; t < threads; ++t) {
      sqlite3* db = nullptr;
      int rc =
          sqlite3_open_v2(uri.path().c_str(), &db,
                          SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
      op->connections_.push_back(db);
      sqlite3_stmt* insert = nullptr;
      if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(
            db, static_cast<int>(
                    busy->value_or(std::chrono::milliseconds(60'000)).count()));
        rc = sqlite3_exec(db, pragma.c_str(), nullptr, nullptr, nullptr);
      }
      if (rc == SQLITE_OK) {
        rc = sqlite3_prepare_v3(
            db,
            "INSERT INTO idem_records (id, state, fingerprint, token, "
            "locked_until, expires_at, record) VALUES (?1, 2, ?2, ?3, ?4, "
            "?5, ?6)",
            -1, SQLITE_PREPARE_PERSISTENT, &insert, nullptr);
      }
      op->inserts_.push_back(insert);
      if (rc != SQLITE_OK) {
        return MakeError(
            ErrorCode::kUnavailable,
            "raw sqlite " + uri.redacted() + ": " +
                (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
      }
    }
    return std::unique_ptr<RawOp>(std::move(op));
  }

  ~SqliteRawOp() override {
    for (sqlite3_stmt* s : inserts_) sqlite3_finalize(s);
    for (sqlite3* db : connections_) sqlite3_close(db);
  }

  Status Write(const RecordId& id, int thread) override {
    sqlite3_stmt* insert = inserts_[thread];
    sqlite3_bind_blob(insert, 1, id.bytes.data(), 32, SQLITE_STATIC);
    sqlite3_bind_blob(insert, 2, fp_.bytes.data(), 32, SQLITE_STATIC);
    sqlite3_bind_blob(insert, 3, token_.bytes.data(), 16, SQLITE_STATIC);
    sqlite3_bind_int64(insert, 4, 1);
    sqlite3_bind_int64(insert, 5, 2);
    sqlite3_bind_blob(insert, 6, value_.data(), static_cast<int>(value_.size()),
                      SQLITE_STATIC);
    const int rc = sqlite3_step(insert);
    sqlite3_reset(insert);
    if (rc == SQLITE_DONE) return {};
    return MakeError(ErrorCode::kUnavailable,
                     std::string("raw insert: ") + sqlite3_errstr(rc));
  }

 private:
  SqliteRawOp() = default;
  std::vector<sqlite3*> connections_;
  std::vector<sqlite3_stmt*> inserts_;
  const Fingerprint fp_ = BenchFingerprint();
  const Token token_;
  std::string value_;
};
#endif  // IDEM_BENCH_HAVE_SQLITE

#ifdef IDEM_BENCH_HAVE_POSTGRES
// Big-endian int8, as PostgreSQL's binary format has it.
std::string Int8(std::int64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

class PostgresRawOp final : public RawOp {
 public:
  static Result<std::unique_ptr<RawOp>> Open(StoreUri& uri,
                                             std::string_view full_uri) {
    const std::string table =
        uri.TakeString("table").value_or("idempotency_keys");
    auto pool = uri.TakeUint("pool", 1, 1024);
    if (!pool) return tl::unexpected(pool.error());
    if (auto s = CreateSchema(full_uri); !s) return tl::unexpected(s.error());
    // libpq takes the URI itself, without idem's parameters.
    const std::string conninfo(full_uri.substr(0, full_uri.find('?')));
    const std::string insert =
        "INSERT INTO \"" + table +
        "\" (id, state, fingerprint, token, locked_until, expires_at, "
        "takeover, record) VALUES ($1, 1, $2, $3, $4, $5, false, $6) "
        "ON CONFLICT (id) DO NOTHING";
    auto op = std::unique_ptr<PostgresRawOp>(new PostgresRawOp());
    for (std::uint64_t i = 0; i < pool->value_or(8); ++i) {
      PGconn* c = PQconnectdb(conninfo.c_str());
      op->all_.push_back(c);
      std::string error;
      if (PQstatus(c) != CONNECTION_OK) {
        error = PQerrorMessage(c);
      } else {
        PGresult* r = PQprepare(c, "raw_insert", insert.c_str(), 6, nullptr);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
          error = PQresultErrorMessage(r);
        }
        PQclear(r);
      }
      if (!error.empty()) {
        return MakeError(ErrorCode::kUnavailable,
                         "raw connection to " + uri.redacted() + ": " + error);
      }
      op->free_.push_back(c);
    }
    const Record record = BenchRecord(RecordState::kInProgress);
    op->record_ = EncodeRecord(record);
    op->fp_.assign(record.fingerprint.view());
    op->locked_ = Int8(record.locked_until.time_since_epoch().count());
    op->expires_ = Int8(record.expires_at.time_since_epoch().count());
    return std::unique_ptr<RawOp>(std::move(op));
  }

  ~PostgresRawOp() override {
    for (PGconn* c : all_) PQfinish(c);
  }

  Status Write(const RecordId& id, int) override {
    const char* values[6] = {id.view().data(), fp_.data(),      token_.data(),
                             locked_.data(),   expires_.data(), record_.data()};
    const int lengths[6] = {32, 32, 16, 8, 8, static_cast<int>(record_.size())};
    const int formats[6] = {1, 1, 1, 1, 1, 1};
    PGconn* c = Acquire();
    PGresult* r = PQexecPrepared(c, "raw_insert", 6, values, lengths, formats,
                                 /*resultFormat=*/1);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    const std::string error = ok ? "" : PQresultErrorMessage(r);
    PQclear(r);
    Release(c);
    if (ok) return {};
    return MakeError(ErrorCode::kUnavailable, "raw insert: " + error);
  }

 private:
  PostgresRawOp() = default;

  // Threads beyond the pool's size queue for a connection, as the store's
  // callers do.
  PGconn* Acquire() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !free_.empty(); });
    PGconn* c = free_.back();
    free_.pop_back();
    return c;
  }
  void Release(PGconn* c) {
    {
      std::lock_guard lock(mu_);
      free_.push_back(c);
    }
    cv_.notify_one();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PGconn*> all_;
  std::vector<PGconn*> free_;
  std::string record_, fp_, locked_, expires_;
  const std::string token_ = std::string(16, '\x5a');
};
#endif  // IDEM_BENCH_HAVE_POSTGRES

#ifdef IDEM_BENCH_HAVE_REDIS
// SET key value NX PX through the store's own pool (and, on a cluster, its
// slot map): the one round trip a claim's script costs at least.
class RedisRawOp final : public RawOp {
 public:
  static Result<std::unique_ptr<RawOp>> Open(StoreUri& uri) {
    IDEM_ASSIGN_OR_RETURN(auto store, RedisStore::OpenFromUri(uri, {}));
    auto op = std::unique_ptr<RedisRawOp>(new RedisRawOp());
    op->store_.reset(static_cast<RedisStore*>(store.release()));
    op->value_ = EncodeRecord(BenchRecord(RecordState::kInProgress));
    return std::unique_ptr<RawOp>(std::move(op));
  }

  Status Write(const RecordId& id, int) override {
    // A short TTL: these keys are not records, so nothing purges them.
    IDEM_ASSIGN_OR_RETURN(
        bool set, store_->SetIfAbsentForBenchmark(store_->KeyOf(id), value_,
                                                  std::chrono::seconds(60)));
    (void)set;  // A key already there is a no-op, as PostgreSQL's.
    return {};
  }

 private:
  RedisRawOp() = default;
  std::unique_ptr<RedisStore> store_;
  std::string value_;
};
#endif  // IDEM_BENCH_HAVE_REDIS

}  // namespace

bool HasRawOp(std::string_view uri) {
  auto parsed = ParseBenchUri(uri);
  if (!parsed) return false;
  const std::string& scheme = parsed->scheme();
  return scheme == "rocksdb" || scheme == "sqlite" || scheme == "postgresql" ||
         scheme == "postgres" || scheme == "redis" || scheme == "redis-cluster";
}

Result<std::unique_ptr<RawOp>> OpenRawOp(std::string_view uri, int threads) {
  auto parsed = ParseBenchUri(uri);
  if (!parsed) return tl::unexpected(parsed.error());
  const std::string& scheme = parsed->scheme();
#ifdef IDEM_BENCH_HAVE_ROCKSDB
  if (scheme == "rocksdb") return RocksdbRawOp::Open(*parsed);
#endif
#ifdef IDEM_BENCH_HAVE_SQLITE
  if (scheme == "sqlite") return SqliteRawOp::Open(*parsed, uri, threads);
#endif
#ifdef IDEM_BENCH_HAVE_POSTGRES
  if (scheme == "postgresql" || scheme == "postgres") {
    return PostgresRawOp::Open(*parsed, uri);
  }
#endif
#ifdef IDEM_BENCH_HAVE_REDIS
  if (scheme == "redis" || scheme == "redis-cluster") {
    return RedisRawOp::Open(*parsed);
  }
#endif
  (void)threads;
  return tl::unexpected(parsed->InvalidArgument(
      "no raw engine operation for scheme '" + scheme + "' in this build"));
}

}  // namespace idem::bench
