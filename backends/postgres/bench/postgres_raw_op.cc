// The postgres store's raw engine write for idem-bench (benchmarks/raw_ops.h):
// one prepared `INSERT .. ON CONFLICT (id) DO NOTHING` through a
// blocking pool of the store's size. Registered by idem_add_backend's
// BENCH_SOURCES.

#include <libpq-fe.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
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

}  // namespace

const RawEngine& PostgresRawEngine() {
  static const RawEngine engine{
      .schemes = {"postgresql", "postgres"},
      .open = [](StoreUri& uri, std::string_view full_uri,
                 int threads) -> Result<std::unique_ptr<RawOp>> {
        (void)threads;
        return PostgresRawOp::Open(uri, full_uri);
      }};
  return engine;
}

}  // namespace idem::bench
