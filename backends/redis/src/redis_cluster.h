// The Redis Cluster client layer of the Redis store: key slots, the slot
// map, and a Router that sends each key to its slot's master and follows
// -MOVED and -ASK redirections (https://redis.io/docs/reference/cluster-spec/).
// Debian's hiredis (0.14) has no cluster support, hence this small layer.
//
// Thread-safety: ClusterRouter may be used from any thread; KeySlot is a
// pure function.

#ifndef IDEM_BACKENDS_REDIS_SRC_REDIS_CLUSTER_H_
#define IDEM_BACKENDS_REDIS_SRC_REDIS_CLUSTER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis_connection.h"
#include "redis_router.h"

namespace idem::redis {

inline constexpr int kClusterSlots = 16384;

// CRC16 (XMODEM) of the key's hash tag (the text between its first '{' and
// the next '}', when not empty; the whole key otherwise) mod 16384.
std::uint16_t KeySlot(std::string_view key);

// A -MOVED or -ASK reply: "MOVED <slot> <host>:<port>".
struct Redirect {
  bool ask = false;
  int slot = 0;
  Endpoint target;
};
std::optional<Redirect> ParseRedirect(const redisReply* reply);

struct ClusterOptions {
  std::vector<Endpoint> seeds;
  ConnectOptions connect;  // db is ignored: a cluster has database 0.
  std::size_t pool_size = 8;
  std::chrono::milliseconds acquire_timeout{5000};
  int max_redirects = 5;
  std::string display;  // Names the cluster in messages.
};

class ClusterRouter final : public Router {
 public:
  // Knows no slot map until Connect() (or the first call) reads one.
  explicit ClusterRouter(ClusterOptions options)
      : options_(std::move(options)) {}

  // Reads the slot map from the first seed that answers CLUSTER SLOTS.
  // Errors: kUnavailable when none does; kInternal when the answer is not
  // a slot map.
  Status Connect() override { return Refresh(); }

  Result<std::vector<Reply>> Run(std::string_view key,
                                 std::span<const Command> commands,
                                 int resends) override;
  std::vector<std::string> Servers() override;
  Result<std::vector<Reply>> RunOn(const std::string& name,
                                   std::span<const Command> commands) override;

  // The master serving `slot` now, by name (for tests).
  std::string MasterOf(int slot);

 private:
  // Reads CLUSTER SLOTS from `pool`'s server and installs it.
  Status RefreshFrom(Pool& pool);
  // Tries the known masters, then the seeds.
  Status Refresh();
  // Refresh() after a failed call, unless one ran in the last
  // kRefreshInterval (an outage must not make every call read the map).
  void MaybeRefresh();
  static constexpr std::chrono::milliseconds kRefreshInterval{100};

  // The pool of `endpoint`, created on first use.
  Pool& PoolOf(const Endpoint& endpoint);
  Pool* PoolOfSlot(int slot);

  const ClusterOptions options_;

  std::mutex mu_;  // Guards the members below.
  std::map<std::string, std::unique_ptr<Pool>> pools_;  // Never erased.
  std::array<Pool*, kClusterSlots> slots_{};
  // steady_clock ticks of the last MaybeRefresh that ran.
  std::atomic<std::int64_t> last_failure_refresh_{0};
};

}  // namespace idem::redis

#endif  // IDEM_BACKENDS_REDIS_SRC_REDIS_CLUSTER_H_
