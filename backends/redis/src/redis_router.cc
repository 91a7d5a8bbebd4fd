#include "redis_router.h"

#include <utility>

#include "redis_cluster.h"

namespace idem::redis {

Result<std::unique_ptr<Router>> OpenRouter(const RedisStoreOptions& options,
                                           const std::string& display) {
  ConnectOptions connect{.user = options.user,
                         .password = options.password,
                         .db = options.db,
                         .timeout = options.timeout};
  if (options.cluster) {
    ClusterOptions cluster;
    for (const auto& n : options.nodes)
      cluster.seeds.push_back({n.host, n.port});
    cluster.connect = connect;
    cluster.pool_size = options.pool_size;
    cluster.acquire_timeout = options.acquire_timeout;
    cluster.max_redirects = RedisStore::kMaxRedirects;
    cluster.display = display;
    IDEM_ASSIGN_OR_RETURN(auto router, ClusterRouter::Open(std::move(cluster)));
    return std::unique_ptr<Router>(std::move(router));
  }
  auto pool = std::make_unique<Pool>(
      Endpoint{options.nodes[0].host, options.nodes[0].port}, connect,
      options.pool_size, options.acquire_timeout, display);
  // Connect now, so that a wrong address fails at start-up.
  IDEM_ASSIGN_OR_RETURN(auto lease, pool->Acquire());
  (void)lease;
  return std::unique_ptr<Router>(
      std::make_unique<SingleRouter>(std::move(pool)));
}

}  // namespace idem::redis
