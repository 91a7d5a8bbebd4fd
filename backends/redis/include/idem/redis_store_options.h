// The options of the Redis and Redis Cluster store (redis_store.h): what
// RedisStore::Open takes, each field with its URI parameter and its default.
// In a header of its own so that the store's internal parts include the
// options without the store's class.
//
// Thread-safety: plain values.

#ifndef IDEM_REDIS_STORE_OPTIONS_H_
#define IDEM_REDIS_STORE_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace idem {

struct RedisStoreOptions {
  struct Node {
    std::string host;
    int port = 6379;
  };
  // The server (standalone) or the seed nodes (cluster): at least one.
  // URI: the host:port list.
  std::vector<Node> nodes;
  // A Redis Cluster instead of one server. URI: scheme redis-cluster.
  bool cluster = false;
  // AUTH after connecting when `password` is not empty (with `user` when
  // that is not empty either: an ACL user). URI: user:password@.
  std::string user;
  std::string password;
  // SELECT after connecting; standalone only (a cluster has database 0).
  // URI: the path, /0../15 or more. Default: 0.
  int db = 0;
  // Key prefix; no '{' or '}', at most 128 bytes. URI parameter `prefix`.
  // Default: "idem:".
  std::string prefix = "idem:";
  // Most connections per server. URI parameter `pool`, 1..1024. Default: 8.
  std::size_t pool_size = 8;
  // Bound of connecting and of every command. URI parameter `timeout_ms`,
  // 1..3600000. Default: 5 s.
  std::chrono::milliseconds timeout{5000};
  // How long a call waits for a free pooled connection. URI parameter
  // `acquire_timeout_ms`, 0..3600000. Default: 5 s.
  std::chrono::milliseconds acquire_timeout{5000};
  // Open a server whose maxmemory-policy may evict keys, and keep serving
  // when a check finds it evicting. URI parameter `allow_eviction`.
  // Default: false.
  bool allow_eviction = false;
  // When the store first reaches its servers. kEager: Open connects and
  // checks them, and fails with what it found. kLazy: Open succeeds without
  // reaching them; every call is kUnavailable until a background connect
  // (retried with a capped back-off) and its checks succeed. URI parameter
  // `connect`, eager or lazy (as for postgresql:). Default: kEager.
  enum class Connect { kEager, kLazy };
  Connect connect = Connect::kEager;
  // How often the servers are checked again once connected (eviction
  // policy, persistence, version, authentication), and so how long an
  // evicting policy set at run time goes unnoticed at most (an -OOM, an
  // odd reply or a record that vanished asks for a check sooner). URI
  // parameter `check_interval_ms`, 10..3600000. Default: 10 s.
  std::chrono::milliseconds check_interval{10000};
  // Replicas a claim and a complete wait for (WAIT), 0 = none. URI
  // parameters `wait`, 0..64, and `wait_ms`, 1..3600000. Default: 0, 1 s.
  int wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{1000};
};

}  // namespace idem

#endif  // IDEM_REDIS_STORE_OPTIONS_H_
