// Where the Redis store's commands go: one server (SingleRouter), or the
// master of a key's slot in a Redis Cluster (ClusterRouter, in
// redis_cluster.h). The store is written against this interface only.
//
// Thread-safety: every method may be called from any thread.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_ROUTER_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_ROUTER_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.h"
#include "idem/redis_store_options.h"
#include "redis_connection.h"

namespace idem::redis {

class Router {
 public:
  virtual ~Router() = default;

  // Runs `commands`, all on `key` (or on none), pipelined on one
  // connection of the server that holds `key`; one reply per command.
  // `resends`: as for Pool::Run.
  virtual Result<std::vector<Reply>> Run(std::string_view key,
                                         std::span<const Command> commands,
                                         int resends) = 0;

  // The servers that hold keys (the masters of a cluster), by name.
  virtual std::vector<std::string> Servers() = 0;

  // Runs `commands` on the server `name` (from Servers()).
  virtual Result<std::vector<Reply>> RunOn(
      const std::string& name, std::span<const Command> commands) = 0;

  // Reaches the server once (one pooled connection), or reads a cluster's
  // slot map, so that Servers() names every server. Errors: kUnavailable
  // (no server answered), what Connection::Open returns (AUTH refused...).
  virtual Status Connect() = 0;
};

// One server, one pool.
class SingleRouter final : public Router {
 public:
  explicit SingleRouter(std::unique_ptr<Pool> pool) : pool_(std::move(pool)) {}

  Result<std::vector<Reply>> Run(std::string_view /*key*/,
                                 std::span<const Command> commands,
                                 int resends) override {
    return pool_->Run(commands, resends);
  }
  std::vector<std::string> Servers() override {
    return {pool_->endpoint().Name()};
  }
  Result<std::vector<Reply>> RunOn(const std::string& /*name*/,
                                   std::span<const Command> commands) override {
    return pool_->Run(commands);
  }
  Status Connect() override {
    IDEM_ASSIGN_OR_RETURN(auto lease, pool_->Acquire());
    (void)lease;
    return {};
  }

 private:
  const std::unique_ptr<Pool> pool_;
};

// The router of `options`' server or cluster (redis_router.cc), not yet
// connected: a SingleRouter, or a ClusterRouter with no slot map. Call
// Connect() before relying on Servers(); until then a cluster's calls
// read the map first.
std::unique_ptr<Router> MakeRouter(const RedisStoreOptions& options,
                                   const std::string& display);

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_ROUTER_H_
