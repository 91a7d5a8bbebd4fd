// The redis store's raw engine write for idem-bench (benchmarks/raw_ops.h):
// one `SET key value NX PX 60000` on the pooled connections of a store
// opened from the URI. Registered by idem_add_backend's BENCH_SOURCES.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "bench_util.h"
#include "idem/error.h"
#include "idem/record.h"
#include "idem/redis_store.h"
#include "idem/store/record_codec.h"
#include "idem/store_uri.h"
#include "raw_ops.h"
#include "redis_store_test_peer.h"

namespace idem::bench {
namespace {

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
    IDEM_ASSIGN_OR_RETURN(bool set, RedisStoreTestPeer::SetIfAbsent(
                                        *store_, store_->KeyOf(id), value_,
                                        std::chrono::seconds(60)));
    (void)set;  // A key already there is a no-op, as PostgreSQL's.
    return {};
  }

 private:
  RedisRawOp() = default;
  std::unique_ptr<RedisStore> store_;
  std::string value_;
};

}  // namespace

const RawEngine& RedisRawEngine() {
  static const RawEngine engine{
      .schemes = {"redis", "redis-cluster"},
      .open = [](StoreUri& uri, std::string_view full_uri,
                 int threads) -> Result<std::unique_ptr<RawOp>> {
        (void)full_uri;
        (void)threads;
        return RedisRawOp::Open(uri);
      }};
  return engine;
}

}  // namespace idem::bench
