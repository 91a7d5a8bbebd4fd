// The store contract suite on the Redis store, against the servers that
// IDEM_TEST_REDIS_URI (one server) and IDEM_TEST_REDIS_CLUSTER_URI (a
// 3-master cluster) name (scripts/test.sh starts both; by hand:
// `export IDEM_TEST_REDIS_URI=$(scripts/redis.sh start)
//  IDEM_TEST_REDIS_CLUSTER_URI=$(scripts/redis.sh cluster)`). Each test
// gets its own key prefix (the suite's unique name), whose keys are
// deleted afterwards, so tests and binaries running at once on one server
// do not meet. Without a variable its tests skip, or fail under CI.

#include <memory>
#include <string>

#include "contract/store_contract.h"
#include "idem/open_store.h"
#include "redis_test_util.h"

namespace {

idem::testing::StoreFactory RedisFactory(std::string name, std::string base,
                                         std::string_view missing) {
  return {
      .name = std::move(name),
      .open = [base](const idem::testing::StoreTestContext& context)
          -> idem::Result<std::unique_ptr<idem::Store>> {
        // A long acquire timeout: the concurrency tests put 32 threads on
        // a pool of 8 on a loaded (or sanitized) machine. No sweeper: the
        // suite counts what PurgeExpired deletes.
        return idem::OpenStore(
            base + "?prefix=" + context.unique_name +
                ":&acquire_timeout_ms=120000&timeout_ms=60000",
            {.clock = context.clock, .sweep_interval = idem::Duration::zero()});
      },
      .cleanup =
          [base](const idem::testing::StoreTestContext& context) {
            idem::testing::DeleteRedisKeys(base, context.unique_name + ":");
          },
      .skip_reason = base.empty() ? std::string(missing) : std::string()};
}

}  // namespace

IDEM_INSTANTIATE_STORE_CONTRACT(Redis,
                                RedisFactory("redis",
                                             idem::testing::RedisTestUri(),
                                             idem::testing::kNoRedis));
IDEM_INSTANTIATE_STORE_CONTRACT(
    RedisCluster,
    RedisFactory("redis_cluster", idem::testing::RedisClusterTestUri(),
                 idem::testing::kNoRedisCluster));
