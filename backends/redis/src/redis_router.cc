#include "redis_router.h"

#include <utility>

#include "idem/redis_store.h"
#include "redis_cluster.h"

namespace idem::redis {

std::unique_ptr<Router> MakeRouter(const RedisStoreOptions& options,
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
    return std::make_unique<ClusterRouter>(std::move(cluster));
  }
  return std::make_unique<SingleRouter>(std::make_unique<Pool>(
      Endpoint{options.nodes[0].host, options.nodes[0].port}, connect,
      options.pool_size, options.acquire_timeout, display));
}

}  // namespace idem::redis
