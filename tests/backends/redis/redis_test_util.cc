#include "redis_test_util.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <system_error>

#include "support/wait_for.h"

namespace idem::testing {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// A port the kernel just handed out for port 0 (another process may take
// it before the server binds it: Start retries).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

void Flatten(const redisReply* r, RawReply& out, bool top) {
  std::string text;
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      text.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      text = "-" + std::string(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      text = std::to_string(r->integer);
      break;
    case REDIS_REPLY_NIL:
      text = "(nil)";
      break;
    case REDIS_REPLY_ARRAY:
      for (std::size_t i = 0; i < r->elements; ++i) {
        Flatten(r->element[i], out, false);
      }
      return;
  }
  if (top) out.text = text;
  out.elements.push_back(text);
  if (!top && out.elements.size() == 1) out.text = text;
}

}  // namespace

std::string RedisTestUri() { return Env("IDEM_TEST_REDIS_URI"); }
std::string RedisClusterTestUri() { return Env("IDEM_TEST_REDIS_CLUSTER_URI"); }

std::vector<std::string> RedisServersOf(const std::string& uri) {
  std::vector<std::string> out;
  const std::size_t start = uri.find("//");
  if (start == std::string::npos) return out;
  std::string authority = uri.substr(start + 2);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  authority = authority.substr(authority.rfind('@') + 1);
  std::size_t at = 0;
  while (at <= authority.size()) {
    const std::size_t comma = authority.find(',', at);
    out.push_back(authority.substr(at, comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

std::string UniqueRedisPrefix(std::string_view name) {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", rd());
  return "idemtest:" + std::string(name) + ":" + std::to_string(::getpid()) +
         ":" + std::to_string(counter.fetch_add(1)) + ":" + suffix + ":";
}

RawReply RedisRaw(const std::string& server,
                  const std::vector<std::string>& argv,
                  const std::string& password) {
  RawReply out;
  const std::size_t colon = server.rfind(':');
  const timeval tv{.tv_sec = 30, .tv_usec = 0};
  redisContext* c = redisConnectWithTimeout(
      server.substr(0, colon).c_str(), std::stoi(server.substr(colon + 1)), tv);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return out;
  }
  redisSetTimeout(c, tv);
  if (!password.empty()) {
    auto* auth = static_cast<redisReply*>(
        redisCommand(c, "AUTH %b", password.data(), password.size()));
    if (auth != nullptr) freeReplyObject(auth);
  }
  std::vector<const char*> args;
  std::vector<std::size_t> lens;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(redisCommandArgv(
      c, static_cast<int>(args.size()), args.data(), lens.data()));
  if (r != nullptr) {
    out.ok = true;
    Flatten(r, out, true);
    freeReplyObject(r);
  }
  redisFree(c);
  return out;
}

void DeleteRedisKeys(const std::string& uri, const std::string& prefix) {
  for (const std::string& server : RedisServersOf(uri)) {
    std::string cursor = "0";
    for (int rounds = 0; rounds < 100000; ++rounds) {
      RawReply scan = RedisRaw(
          server, {"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"});
      if (!scan.ok || scan.elements.empty()) break;
      cursor = scan.elements[0];
      for (std::size_t i = 1; i < scan.elements.size(); ++i) {
        RedisRaw(server, {"DEL", scan.elements[i]});
      }
      if (cursor == "0") break;
    }
  }
}

PrivateRedis::PrivateRedis(std::vector<std::string> args)
    : args_(std::move(args)) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "idem-redis-private-XXXXXX")
          .string();
  if (::mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
}

PrivateRedis::~PrivateRedis() {
  Stop();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

bool PrivateRedis::Start() {
  if (dir_.empty()) {
    error_ = "no temporary directory";
    return false;
  }
  if (pid_ > 0) return true;
  const bool fixed = port_ != 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (!fixed) port_ = FreePort();
    std::vector<std::string> argv = {"redis-server",
                                     "--bind",
                                     "127.0.0.1",
                                     "--port",
                                     std::to_string(port_),
                                     "--dir",
                                     dir_.string(),
                                     "--logfile",
                                     (dir_ / "redis.log").string(),
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no"};
    argv.insert(argv.end(), args_.begin(), args_.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid == 0) {
      // The server dies with the test, however the test ends.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::execvp("redis-server", cargv.data());
      ::_exit(127);
    }
    if (pid < 0) {
      error_ = "fork failed";
      return false;
    }
    pid_ = pid;
    bool exited = false;
    const bool up = WaitFor(
        [&] {
          int status = 0;
          if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            exited = true;
            return true;
          }
          // A server with requirepass answers -NOAUTH: up too.
          const std::string pong = RedisRaw(server(), {"PING"}).text;
          return pong == "PONG" || pong.rfind("-NOAUTH", 0) == 0;
        },
        std::chrono::seconds(60), std::chrono::milliseconds(20));
    if (up && !exited) return true;
    if (!exited) Stop();
    pid_ = -1;
    if (fixed) break;
  }
  error_ = "redis-server did not start on " + server() + " (log in " +
           (dir_ / "redis.log").string() + ")";
  return false;
}

bool PrivateRedis::Freeze() { return pid_ > 0 && ::kill(pid_, SIGSTOP) == 0; }

bool PrivateRedis::Thaw() { return pid_ > 0 && ::kill(pid_, SIGCONT) == 0; }

bool PrivateRedis::Stop() {
  if (pid_ <= 0) return true;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return true;
}

}  // namespace idem::testing
