// The sqlite store's raw engine write for idem-bench (benchmarks/raw_ops.h):
// one autocommit INSERT of a fresh row into the store's own table, one
// connection per thread. Registered by idem_add_backend's BENCH_SOURCES.

#include <sqlite3.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "idem/error.h"
#include "idem/record.h"
#include "idem/store/record_codec.h"
#include "idem/store_uri.h"
#include "raw_ops.h"

namespace idem::bench {
namespace {

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

}  // namespace

const RawEngine& SqliteRawEngine() {
  static const RawEngine engine{
      .schemes = {"sqlite"},
      .open = [](StoreUri& uri, std::string_view full_uri,
                 int threads) -> Result<std::unique_ptr<RawOp>> {
        return SqliteRawOp::Open(uri, full_uri, threads);
      }};
  return engine;
}

}  // namespace idem::bench
