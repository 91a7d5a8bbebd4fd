#include "support/demo_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <system_error>
#include <thread>

#include "support/spawn_args.h"

namespace idem::testing::proc {

using std::chrono::milliseconds;

std::string HttpResponse::Header(std::string_view name) const {
  std::size_t pos = head.find("\r\n");
  while (pos != std::string::npos && pos + 2 < head.size()) {
    const std::size_t start = pos + 2;
    const std::size_t end = head.find("\r\n", start);
    const std::string line = head.substr(
        start, end == std::string::npos ? std::string::npos : end - start);
    const std::size_t colon = line.find(':');
    if (colon != std::string::npos && colon == name.size() &&
        std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
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

std::string Describe(const std::optional<HttpResponse>& r) {
  if (!r) return "<no response>";
  return r->head + "\r\n\r\n" + r->body;
}

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

std::string RawRequest(std::string_view method, std::string_view target,
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

std::optional<HttpResponse> ReadResponse(int fd,
                                         SteadyClock::time_point deadline) {
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
        std::chrono::duration_cast<milliseconds>(deadline - SteadyClock::now());
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
                                 std::chrono::seconds timeout) {
  const int fd = Connect(port);
  if (fd < 0) return std::nullopt;
  std::optional<HttpResponse> r;
  if (WriteAll(fd, RawRequest(method, target, key, body))) {
    r = ReadResponse(fd, SteadyClock::now() + timeout);
  }
  ::close(fd);
  return r;
}

int HandlerRuns(std::uint16_t port) {
  const auto r = Send(port, "GET", "/stats", "", "");
  if (!r || r->status != 200) return -1;
  const std::string field = "\"handler_runs\":";
  const std::size_t at = r->body.find(field);
  if (at == std::string::npos) return -1;
  return std::atoi(r->body.c_str() + at + field.size());
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

DemoProcess::DemoProcess(const std::string& binary,
                         const std::string& store_uri,
                         const std::filesystem::path& log,
                         const std::vector<std::string>& extra_args) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) std::abort();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<std::string> args = {binary, "--listen", "127.0.0.1:0", "--store",
                                   store_uri};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  const SpawnArgs spawn(std::move(args));
  const int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr,
                             spawn.argv(), spawn.envp());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  out_ = out[0];
  if (rc != 0) pid_ = -1;
}

DemoProcess::~DemoProcess() {
  Kill();
  ::close(out_);
}

std::uint16_t DemoProcess::WaitListening(std::chrono::seconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  std::string line;
  while (SteadyClock::now() < deadline && pid_ > 0) {
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

void DemoProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void DemoProcess::Signal(int signal) {
  if (pid_ > 0) ::kill(pid_, signal);
}

std::optional<int> DemoProcess::Wait(std::chrono::seconds timeout) {
  if (pid_ > 0) {
    WaitFor(
        [&] {
          int status = 0;
          if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
          status_ = status;
          pid_ = -1;
          return true;
        },
        std::chrono::duration_cast<milliseconds>(timeout), milliseconds(10));
  }
  if (!status_ || !WIFEXITED(*status_)) return std::nullopt;
  return WEXITSTATUS(*status_);
}

std::string DemoProcess::RestOfStdout() {
  std::string all;
  for (;;) {
    pollfd p{out_, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    char buf[4096];
    const ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) break;
    all.append(buf, static_cast<std::size_t>(n));
  }
  return all;
}

ProgramRun RunProgram(const std::string& binary,
                      const std::vector<std::string>& args,
                      const std::filesystem::path& dir,
                      const std::filesystem::path& cwd,
                      std::chrono::seconds timeout) {
  const std::filesystem::path out = dir / "program.out";
  const std::filesystem::path err = dir / "program.err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  }
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!std::string_view(*e).starts_with("IDEM_STORE=")) env.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr,
                             argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ProgramRun run;
  if (rc != 0) return run;
  std::optional<int> status;
  WaitFor(
      [&] {
        int s = 0;
        if (::waitpid(pid, &s, WNOHANG) != pid) return false;
        status = s;
        return true;
      },
      std::chrono::duration_cast<milliseconds>(timeout), milliseconds(10));
  if (!status) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  } else if (WIFEXITED(*status)) {
    run.exit_status = WEXITSTATUS(*status);
  }
  run.out = ReadFile(out);
  run.err = ReadFile(err);
  return run;
}

}  // namespace idem::testing::proc
