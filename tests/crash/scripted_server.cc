#include "scripted_server.h"

#include <unistd.h>

#include <utility>

#include "support/built_path.h"
#include "support/shell_command.h"

#ifndef IDEM_REDIS_SCRIPT
#error "IDEM_REDIS_SCRIPT must name scripts/redis.sh"
#endif
#ifndef IDEM_POSTGRES_SCRIPT
#error "IDEM_POSTGRES_SCRIPT must name scripts/postgres.sh"
#endif

namespace idem::testing {

std::unique_ptr<ScriptedServer> ScriptedServer::NewRedis(
    const std::string& appendfsync, const std::string& start) {
  auto server = std::unique_ptr<ScriptedServer>(new ScriptedServer(
      ::idem::testing::BuiltPath(IDEM_REDIS_SCRIPT),
      {"IDEM_REDIS_APPENDFSYNC='" + appendfsync + "'"}, start));
  server->env_.push_back("IDEM_REDIS_STATE='" +
                         (server->dir_.path() / "redis").string() + "'");
  server->env_.push_back("IDEM_REDIS_OWNER_PID=" + std::to_string(::getpid()));
  return server;
}

std::unique_ptr<ScriptedServer> ScriptedServer::Redis(
    const std::string& appendfsync) {
  return NewRedis(appendfsync, "start");
}

std::unique_ptr<ScriptedServer> ScriptedServer::RedisCluster(
    const std::string& appendfsync) {
  return NewRedis(appendfsync, "cluster");
}

std::unique_ptr<ScriptedServer> ScriptedServer::Postgres() {
  auto server = std::unique_ptr<ScriptedServer>(new ScriptedServer(
      ::idem::testing::BuiltPath(IDEM_POSTGRES_SCRIPT), {"IDEM_PG_FSYNC=on"}));
  server->env_.push_back("IDEM_PG_STATE='" +
                         (server->dir_.path() / "state").string() + "'");
  server->env_.push_back("IDEM_PG_OWNER_PID=" + std::to_string(::getpid()));
  return server;
}

ScriptedServer::ScriptedServer(std::string script, std::vector<std::string> env,
                               std::string start)
    : dir_("idem-crash-server"),
      script_(std::move(script)),
      start_(std::move(start)),
      env_(std::move(env)) {}

ScriptedServer::~ScriptedServer() {
  if (started_) Run("stop", nullptr);
}

std::filesystem::path ScriptedServer::redis_data_dir() const {
  if (script_ != ::idem::testing::BuiltPath(IDEM_REDIS_SCRIPT) ||
      start_ != "start")
    return {};
  return dir_.path() / "redis" / "standalone";
}

bool ScriptedServer::Run(const std::string& command, std::string* out) {
  std::string line;
  for (const std::string& e : env_) line += e + " ";
  line += "'" + script_ + "' " + command;
  std::string error;
  if (RunShellCommand(line, out, &error)) return true;
  error_ = script_ + " " + command + " " + error;
  return false;
}

bool ScriptedServer::Start() {
  started_ = true;  // Stopped by the destructor even if half started.
  return Run(start_, &uri_);
}

namespace {

std::string WithNode(const std::string& command, int node) {
  return node > 0 ? command + " " + std::to_string(node) : command;
}

}  // namespace

bool ScriptedServer::Kill(int node) {
  return Run(WithNode("kill", node), nullptr);
}

bool ScriptedServer::Resume(int node) {
  std::string uri;
  if (!Run(WithNode("resume", node), &uri)) return false;
  if (uri != uri_) {
    error_ = "resumed on " + uri + ", not " + uri_;
    return false;
  }
  return true;
}

}  // namespace idem::testing
