// The Redis store's descriptor (idem/store/store_descriptor.h): how
// OpenStore, the contract suite and idem-bench find and set it up.

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>

#include "idem/redis_store.h"
#include "idem/store/local_cache.h"
#include "idem/store/store_descriptor.h"
#include "idem/store_uri.h"

namespace idem {
namespace {

// Deletes the records of a fresh store's prefix: every one has expired by
// the end of time. Keys that are not records (idem-bench's raw writes)
// expire on their own.
void PurgePrefix(std::string_view uri) {
  auto parsed = StoreUri::Parse(RedisStore::ClusterUriForParsing(uri));
  if (!parsed || !parsed->TakeString("prefix")) return;  // Never the default.
  parsed = StoreUri::Parse(RedisStore::ClusterUriForParsing(uri));
  if (!parsed) return;
  // The store itself, without the local cache a setup may ask for (the
  // typed Open does not take its parameters).
  LocalCacheOptions uncached;
  if (!ReadLocalCacheOptions(*parsed, uncached)) return;
  auto store = RedisStore::OpenFromUri(*parsed, {});
  if (!store) return;
  (void)(*store)->PurgeExpired(TimePoint::max(),
                               std::numeric_limits<std::size_t>::max());
}

}  // namespace

const StoreDescriptor& RedisStoreDescriptor() {
  static const StoreDescriptor descriptor{
      .name = "redis",
      .schemes = {"redis", "redis-cluster"},
      .parameters = {"prefix", "pool", "timeout_ms", "acquire_timeout_ms",
                     "allow_eviction", "connect", "check_interval_ms", "wait",
                     "wait_ms", "nodes", "local_cache", "local_cache_ttl_s",
                     "local_cache_mb"},
      .rewrite_uri = &RedisStore::ClusterUriForParsing,
      // The local cache (idem/store/local_cache.h) in front when the URI
      // asks for one.
      .open =
          [](StoreUri& uri, const StoreOptions& options) {
            return OpenWithLocalCache(uri, options, &RedisStore::OpenFromUri);
          },
      // durable: as the server is configured (RedisStore::Info()).
      // async_calls: redis://'s (a cluster's calls are synchronous).
      .capabilities = {.name = "redis",
                       .durable = false,
                       .shared_across_processes = true,
                       .async_calls = true},
      .fresh_uri =
          [](std::string_view uri, std::string_view name) {
            return WithUriParam(uri, "prefix", std::string(name) + ":");
          },
      .remove = &PurgePrefix,
      // A long acquire timeout: the concurrency tests put 32 threads on a
      // pool of 8 on a loaded (or sanitized) machine.
      .setups = {{.label = "redis",
                  .server_env = "IDEM_TEST_REDIS_URI",
                  .params = "acquire_timeout_ms=120000&timeout_ms=60000",
                  .through_async_calls = true},
                 {.label = "redis_cluster",
                  .server_env = "IDEM_TEST_REDIS_CLUSTER_URI",
                  .params = "acquire_timeout_ms=120000&timeout_ms=60000"},
                 // The suite with the local cache in front: it must answer
                 // every row as the store does.
                 {.label = "redis_local_cache",
                  .server_env = "IDEM_TEST_REDIS_URI",
                  .params = "acquire_timeout_ms=120000&timeout_ms=60000"
                            "&local_cache=1000",
                  .through_async_calls = true},
                 {.label = "redis_cluster_local_cache",
                  .server_env = "IDEM_TEST_REDIS_CLUSTER_URI",
                  .params = "acquire_timeout_ms=120000&timeout_ms=60000"
                            "&local_cache=1000"}},
  };
  return descriptor;
}

}  // namespace idem
