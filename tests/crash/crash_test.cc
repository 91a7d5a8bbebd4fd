// Crash tests: the idem-demo binary on each durable embedded store, killed
// with SIGKILL and restarted on the same files, twenty times per store.
//
// Each round, on a freshly started server:
//  1. every request completed in earlier rounds is still a replay (same
//     status and body, Idempotent-Replayed: true): no completed record lost;
//  2. the slow request of the previous round, whose handler was killed
//     mid-flight, is retried: it gets 409 while the lock it left behind
//     holds (--lock-timeout 2), then its handler runs again (a takeover);
//  3. a new request completes (201), and a new slow one (delay_ms=10000)
//     starts its handler;
//  4. the server is killed with SIGKILL, the slow handler still sleeping.
// A round ends with a kill, so the next round's replays read what the killed
// process wrote: nothing was flushed or closed cleanly.
//
// IDEM_DEMO_PATH is set by CMake to the built binary. Only 127.0.0.1 and
// port 0. Waits are bounded polling loops with generous deadlines, since the
// tests also run under ASan and TSan on a loaded two-core machine.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

extern char** environ;

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr int kRounds = 20;
constexpr int kLockTimeoutSeconds = 2;
constexpr char kSlowTarget[] = "/orders?delay_ms=10000";

class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "idem-crash-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// ---- A minimal HTTP/1.1 client over POSIX sockets ---------------------------

struct HttpResponse {
  int status = 0;
  std::string head;  // Status line and headers, as received.
  std::string body;

  // The value of header `name` (ASCII case-insensitive), or "".
  std::string Header(std::string_view name) const {
    std::size_t pos = head.find("\r\n");
    while (pos != std::string::npos && pos + 2 < head.size()) {
      const std::size_t start = pos + 2;
      const std::size_t end = head.find("\r\n", start);
      const std::string line = head.substr(
          start, end == std::string::npos ? std::string::npos : end - start);
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos && colon == name.size() &&
          std::equal(name.begin(), name.end(), line.begin(),
                     [](char a, char b) {
                       return std::tolower(static_cast<unsigned char>(a)) ==
                              std::tolower(static_cast<unsigned char>(b));
                     })) {
        std::size_t v = colon + 1;
        while (v < line.size() && line[v] == ' ') ++v;
        return line.substr(v);
      }
      pos = end;
    }
    return "";
  }
};

std::string Describe(const std::optional<HttpResponse>& r) {
  if (!r) return "<no response>";
  return r->head + "\r\n\r\n" + r->body;
}

// A connected socket, or -1.
int Connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string Request(std::string_view method, std::string_view target,
                    std::string_view key, std::string_view body) {
  std::string r = std::string(method) + " " + std::string(target) +
                  " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!key.empty()) r += "Idempotency-Key: " + std::string(key) + "\r\n";
  if (method == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n";
  }
  r += "\r\n";
  r += body;
  return r;
}

// Reads one response from `fd` until `deadline`; nullopt on EOF before a
// whole response, an error or the deadline.
std::optional<HttpResponse> ReadResponse(int fd, Clock::time_point deadline) {
  std::string data;
  std::optional<std::size_t> head_end;
  std::size_t content_length = 0;
  HttpResponse r;
  for (;;) {
    if (head_end && data.size() >= *head_end + 4 + content_length) {
      r.body = data.substr(*head_end + 4, content_length);
      return r;
    }
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1,
               static_cast<int>(std::min<long long>(left.count(), 200))) <= 0) {
      continue;
    }
    char buf[8192];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return std::nullopt;
    data.append(buf, static_cast<std::size_t>(n));
    if (!head_end) {
      const std::size_t end = data.find("\r\n\r\n");
      if (end == std::string::npos) continue;
      head_end = end;
      r.head = data.substr(0, end);
      if (r.head.size() < 12 || r.head.compare(0, 5, "HTTP/") != 0) {
        return std::nullopt;
      }
      r.status = std::atoi(r.head.c_str() + 9);
      const std::string length = r.Header("Content-Length");
      content_length = length.empty() ? 0 : std::stoul(length);
    }
  }
}

std::optional<HttpResponse> Send(std::uint16_t port, std::string_view method,
                                 std::string_view target, std::string_view key,
                                 std::string_view body,
                                 seconds timeout = seconds(60)) {
  const int fd = Connect(port);
  if (fd < 0) return std::nullopt;
  std::optional<HttpResponse> r;
  if (WriteAll(fd, Request(method, target, key, body))) {
    r = ReadResponse(fd, Clock::now() + timeout);
  }
  ::close(fd);
  return r;
}

// handler_runs from GET /stats, or -1.
int HandlerRuns(std::uint16_t port) {
  const auto r = Send(port, "GET", "/stats", "", "");
  if (!r || r->status != 200) return -1;
  const std::string field = "\"handler_runs\":";
  const std::size_t at = r->body.find(field);
  if (at == std::string::npos) return -1;
  return std::atoi(r->body.c_str() + at + field.size());
}

// Polls `done` every 20 ms until it holds or `timeout` passes.
template <typename Fn>
bool WaitFor(Fn&& done, seconds timeout = seconds(120)) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return done();
}

// ---- One idem-demo process
// ---------------------------------------------------

class DemoProcess {
 public:
  DemoProcess(const std::string& store_uri, const std::filesystem::path& log) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) std::abort();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<std::string> args = {IDEM_DEMO_PATH,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--store",
                                     store_uri,
                                     "--lock-timeout",
                                     std::to_string(kLockTimeoutSeconds),
                                     "--instance",
                                     "crash"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (!std::string_view(*e).starts_with("IDEM_STORE="))
        env.emplace_back(*e);
    }
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, IDEM_DEMO_PATH, &actions, nullptr,
                               argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    out_ = out[0];
    if (rc != 0) pid_ = -1;
  }

  ~DemoProcess() {
    Kill();
    ::close(out_);
  }

  DemoProcess(const DemoProcess&) = delete;
  DemoProcess& operator=(const DemoProcess&) = delete;

  // The port from "listening on 127.0.0.1:PORT", or 0 after EOF or timeout.
  std::uint16_t WaitListening(seconds timeout = seconds(120)) {
    const auto deadline = Clock::now() + timeout;
    std::string line;
    while (Clock::now() < deadline && pid_ > 0) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char c;
      if (::read(out_, &c, 1) != 1) break;
      if (c != '\n') {
        line += c;
        continue;
      }
      constexpr std::string_view kPrefix = "listening on 127.0.0.1:";
      if (!line.starts_with(kPrefix)) return 0;
      return static_cast<std::uint16_t>(std::stoi(line.substr(kPrefix.size())));
    }
    return 0;
  }

  // SIGKILL, then reap: when this returns the process is gone and its file
  // locks are released.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// ---- The test
// ------------------------------------------------------------------

struct StoreCase {
  const char* name;
  // The store URI for files under `dir`.
  std::string (*uri)(const std::filesystem::path& dir);
};

std::string RocksdbUri(const std::filesystem::path& dir) {
  return "rocksdb:" + (dir / "db").string();
}
std::string SqliteUri(const std::filesystem::path& dir) {
  return "sqlite:" + (dir / "idem.db").string();
}

class CrashTest : public ::testing::TestWithParam<StoreCase> {};

struct Completed {
  std::string key;
  std::string target;
  std::string body;
  HttpResponse response;
};

TEST_P(CrashTest, KillNineKeepsEveryCompletedRecordAndEveryLock) {
  TempDir dir;
  const std::string uri = GetParam().uri(dir.path());
  const std::filesystem::path log = dir.path() / "demo.log";
  std::vector<Completed> completed;
  // The slow request of the previous round, killed mid-handler, and when it
  // was sent (its lock ends no earlier than that plus the lock timeout).
  std::optional<std::string> pending_slow_key;
  std::string pending_slow_body;
  Clock::time_point pending_slow_sent;
  int rounds_with_a_409 = 0;
  int rounds_checked_409 = 0;

  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    DemoProcess demo(uri, log);
    const std::uint16_t port = demo.WaitListening();
    ASSERT_NE(port, 0) << "idem-demo did not start; its stderr:\n"
                       << ReadFile(log);

    // 1. Nothing completed before a kill is lost.
    for (const Completed& c : completed) {
      const auto replay = Send(port, "POST", c.target, c.key, c.body);
      ASSERT_TRUE(replay.has_value()) << c.key << "\n" << ReadFile(log);
      EXPECT_EQ(replay->status, c.response.status) << c.key;
      EXPECT_EQ(replay->Header("Idempotent-Replayed"), "true")
          << c.key << ": " << Describe(replay);
      EXPECT_EQ(replay->body, c.response.body) << c.key;
    }

    // 2. The request killed mid-handler: 409 while its lock holds, then its
    // handler runs again. A 409 is answered at once; the retry that takes
    // the lock over blocks in the 10 s handler, which /stats shows.
    if (pending_slow_key) {
      const int runs_before = HandlerRuns(port);
      ASSERT_GE(runs_before, 0);
      int conflicts = 0;
      bool taken_over = false;
      std::optional<Clock::duration> first_sent;  // After the killed claim.
      const auto deadline = Clock::now() + seconds(120);
      while (!taken_over && Clock::now() < deadline) {
        const int fd = Connect(port);
        ASSERT_GE(fd, 0);
        if (!first_sent) first_sent = Clock::now() - pending_slow_sent;
        ASSERT_TRUE(WriteAll(fd, Request("POST", kSlowTarget, *pending_slow_key,
                                         pending_slow_body)));
        std::optional<HttpResponse> answer;
        while (Clock::now() < deadline) {
          pollfd p{fd, POLLIN, 0};
          if (::poll(&p, 1, 50) > 0) {
            answer = ReadResponse(fd, Clock::now() + seconds(60));
            break;
          }
          if (HandlerRuns(port) > runs_before) {
            taken_over = true;
            break;
          }
        }
        ::close(fd);
        if (taken_over) {
          // Its claim came after it was sent, so the lock cannot have timed
          // out sooner than this.
          EXPECT_GE(Clock::now() - pending_slow_sent,
                    seconds(kLockTimeoutSeconds));
          break;
        }
        ASSERT_TRUE(answer.has_value()) << ReadFile(log);
        ASSERT_EQ(answer->status, 409) << Describe(answer);
        ++conflicts;
        std::this_thread::sleep_for(milliseconds(100));
      }
      ASSERT_TRUE(taken_over) << "the killed request's lock never timed out";
      // A retry sent while the lock surely held must have been refused.
      // (Under a sanitizer a restart may take longer than the lock timeout;
      // then only the takeover is checked.)
      if (*first_sent < seconds(kLockTimeoutSeconds)) {
        EXPECT_GT(conflicts, 0);
        ++rounds_checked_409;
      }
      if (conflicts > 0) ++rounds_with_a_409;
    }

    // 3. A request that completes, and a slow one whose handler starts.
    Completed done;
    done.key = "done-" + std::to_string(round);
    done.target = "/orders";
    done.body = "{\"round\":" + std::to_string(round) + "}";
    const auto created = Send(port, "POST", done.target, done.key, done.body);
    ASSERT_TRUE(created.has_value()) << ReadFile(log);
    ASSERT_EQ(created->status, 201) << Describe(created);
    ASSERT_EQ(created->Header("Idempotent-Replayed"), "");
    done.response = *created;
    completed.push_back(done);

    const int runs_before = HandlerRuns(port);
    ASSERT_GE(runs_before, 0);
    pending_slow_key = "slow-" + std::to_string(round);
    pending_slow_body = "{\"slow\":" + std::to_string(round) + "}";
    const int slow_fd = Connect(port);
    ASSERT_GE(slow_fd, 0);
    pending_slow_sent = Clock::now();
    ASSERT_TRUE(WriteAll(
        slow_fd,
        Request("POST", kSlowTarget, *pending_slow_key, pending_slow_body)));
    ASSERT_TRUE(WaitFor([&] { return HandlerRuns(port) > runs_before; }))
        << "the slow handler did not start";

    // 4. Kill it mid-handler.
    demo.Kill();
    ::close(slow_fd);
  }
  RecordProperty("rounds_with_a_409", rounds_with_a_409);
  RecordProperty("rounds_that_had_to_see_a_409", rounds_checked_409);
  std::printf("%s: %d of %d retried rounds saw 409 before the takeover\n",
              GetParam().name, rounds_with_a_409, kRounds - 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, CrashTest,
                         ::testing::Values(StoreCase{"rocksdb", &RocksdbUri},
                                           StoreCase{"sqlite", &SqliteUri}),
                         [](const ::testing::TestParamInfo<StoreCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
