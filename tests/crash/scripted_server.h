// A store server of one test's own, run by scripts/redis.sh or
// scripts/postgres.sh with a state directory of its own, so that the test
// can kill it as a crash does and start it again on the same port and data:
//  - Redis: `start` (or `cluster`: three masters) with
//    IDEM_REDIS_APPENDFSYNC (appendonly yes and that appendfsync; "" = no
//    persistence), `kill [N]` (SIGKILL of the server, or of cluster node
//    N), `resume [N]`;
//  - PostgreSQL: `start` with IDEM_PG_FSYNC=on, `kill` (pg_ctl stop -m
//    immediate: no checkpoint), `resume` (recovery from the WAL).
// The script's watchdog (IDEM_*_OWNER_PID) stops the server if the test
// process dies first; the destructor stops it and deletes its data.
//
// Thread-safety: a ScriptedServer is used by one thread.

#ifndef IDEM_TESTS_CRASH_SCRIPTED_SERVER_H_
#define IDEM_TESTS_CRASH_SCRIPTED_SERVER_H_

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace idem::testing {

class ScriptedServer {
 public:
  // A standalone redis-server; `appendfsync` is always, everysec or no
  // (AOF on), or "" (persistence off, the script's default).
  static std::unique_ptr<ScriptedServer> Redis(const std::string& appendfsync);
  // A three-master Redis Cluster, the same.
  static std::unique_ptr<ScriptedServer> RedisCluster(
      const std::string& appendfsync);
  // A PostgreSQL server with fsync on.
  static std::unique_ptr<ScriptedServer> Postgres();

  ~ScriptedServer();
  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  // `start`: true once the server answers; uri() is then its URI. On
  // false, error() says why (the script's stderr is the test's).
  bool Start();
  // `kill`: true once the server (`node` > 0: that cluster node, 1-3) is
  // gone, its data and port kept.
  bool Kill(int node = 0);
  // `resume`: true once it answers again on the same port and data (a
  // cluster node: once it says cluster_state:ok).
  bool Resume(int node = 0);

  const std::string& uri() const { return uri_; }
  const std::string& error() const { return error_; }
  // The standalone Redis server's data directory (its append-only files
  // are in appendonlydir/); "" for a cluster and for PostgreSQL.
  std::filesystem::path redis_data_dir() const;

 private:
  ScriptedServer(std::string script, std::vector<std::string> env,
                 std::string start = "start");
  static std::unique_ptr<ScriptedServer> NewRedis(
      const std::string& appendfsync, const std::string& start);
  // Runs `<env> script command`; its trimmed stdout in *out.
  bool Run(const std::string& command, std::string* out);

  TempDir dir_;
  std::string script_;
  std::string start_;             // The command that starts it.
  std::vector<std::string> env_;  // NAME=value, quoted for the shell.
  std::string uri_;
  std::string error_;
  bool started_ = false;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_CRASH_SCRIPTED_SERVER_H_
