// Test helpers for the Redis store: the shared test servers' URIs, raw
// commands through hiredis, cleanup by key prefix, and private servers
// that a test may configure, stop and restart.
//
// The shared servers come from IDEM_TEST_REDIS_URI (redis://127.0.0.1:PORT/0)
// and IDEM_TEST_REDIS_CLUSTER_URI (redis-cluster://127.0.0.1:P1,...);
// scripts/test.sh starts them with scripts/redis.sh and exports both. Tests
// that need one skip without it, except under CI (the CI variable set),
// where they fail.
//
// Thread-safety: the free functions may be called from any thread; a
// PrivateRedis is used by one thread.

#ifndef IDEM_TESTS_BACKENDS_REDIS_REDIS_TEST_UTIL_H_
#define IDEM_TESTS_BACKENDS_REDIS_REDIS_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace idem::testing {

inline constexpr std::string_view kNoRedis =
    "IDEM_TEST_REDIS_URI not set (export "
    "IDEM_TEST_REDIS_URI=$(scripts/redis.sh start))";
inline constexpr std::string_view kNoRedisCluster =
    "IDEM_TEST_REDIS_CLUSTER_URI not set (export "
    "IDEM_TEST_REDIS_CLUSTER_URI=$(scripts/redis.sh cluster))";

// The variables' values, or "" when unset.
std::string RedisTestUri();
std::string RedisClusterTestUri();

// Inside a TEST body or fixture SetUp: skips (or, under CI, fails) when
// the variable is unset.
#define IDEM_REQUIRE_TEST_REDIS_(uri, message)               \
  do {                                                       \
    if ((uri).empty()) {                                     \
      if (std::getenv("CI") != nullptr) FAIL() << (message); \
      GTEST_SKIP() << (message);                             \
    }                                                        \
  } while (0)
#define IDEM_REQUIRE_TEST_REDIS()                           \
  IDEM_REQUIRE_TEST_REDIS_(::idem::testing::RedisTestUri(), \
                           ::idem::testing::kNoRedis)
#define IDEM_REQUIRE_TEST_REDIS_CLUSTER()                          \
  IDEM_REQUIRE_TEST_REDIS_(::idem::testing::RedisClusterTestUri(), \
                           ::idem::testing::kNoRedisCluster)

// The host:port servers a redis:// or redis-cluster:// URI names.
std::vector<std::string> RedisServersOf(const std::string& uri);

// A prefix no other test (in this or another process) uses, ending in ':'.
std::string UniqueRedisPrefix(std::string_view name);

// One reply, flattened: strings of a bulk/status/error (errors as "-ERR
// ..."), integers in decimal, arrays element by element, nil as "(nil)".
struct RawReply {
  bool ok = false;   // Connected and got a reply.
  std::string text;  // The first (or only) value.
  std::vector<std::string> elements;
};

// Runs one command on `server` (host:port) over a fresh connection, after
// AUTH `password` when it is not empty.
RawReply RedisRaw(const std::string& server,
                  const std::vector<std::string>& argv,
                  const std::string& password = "");

// Deletes every key starting with `prefix` on every server of `uri`.
void DeleteRedisKeys(const std::string& uri, const std::string& prefix);

// A redis-server of the test's own, on a free port in a temporary
// directory, stopped and deleted by the destructor.
class PrivateRedis {
 public:
  // `args` are extra redis-server arguments ("--maxmemory", "1mb", ...).
  explicit PrivateRedis(std::vector<std::string> args = {});
  ~PrivateRedis();
  PrivateRedis(const PrivateRedis&) = delete;
  PrivateRedis& operator=(const PrivateRedis&) = delete;

  // Starts it on a free port (the first time) or on its port again (after
  // Stop); true once it answers PING. On false, error() says why.
  bool Start();
  // Kills it (SIGKILL: as a crash) and waits until it is gone.
  bool Stop();
  // SIGSTOP: connections are accepted by the kernel but nothing answers,
  // as with a dropped network. Thaw (SIGCONT) lets it run again.
  bool Freeze();
  bool Thaw();

  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string uri() const { return "redis://" + server() + "/0"; }
  const std::filesystem::path& dir() const { return dir_; }
  const std::string& error() const { return error_; }

 private:
  std::vector<std::string> args_;
  std::filesystem::path dir_;
  int port_ = 0;
  int pid_ = -1;
  std::string error_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_BACKENDS_REDIS_REDIS_TEST_UTIL_H_
