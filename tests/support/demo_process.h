// Helpers for tests that run a demo server (idem-demo, idem-grpc-demo) as a
// separate process and talk to it over real sockets (crash tests,
// multi-instance tests, the gRPC demo's tests): a minimal blocking HTTP/1.1
// client on POSIX sockets with deadlines, bounded polling, and the demo
// process itself, started with posix_spawn, signalled, waited for or killed
// with SIGKILL; and a program run to its exit (bad flags).
//
// Only 127.0.0.1 and port 0. Every wait has a generous deadline: the tests
// also run under ASan and TSan on a loaded two-core machine.
//
// Thread-safety: the free functions may be called from any thread; a
// DemoProcess belongs to one thread.

#ifndef IDEM_TESTS_SUPPORT_DEMO_PROCESS_H_
#define IDEM_TESTS_SUPPORT_DEMO_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace idem::testing::proc {

using SteadyClock = std::chrono::steady_clock;

struct HttpResponse {
  int status = 0;
  std::string head;  // Status line and headers, as received.
  std::string body;

  // The value of header `name` (ASCII case-insensitive), or "".
  std::string Header(std::string_view name) const;
};

// The response as text, or "<no response>".
std::string Describe(const std::optional<HttpResponse>& r);

// A socket connected to 127.0.0.1:port, or -1.
int Connect(std::uint16_t port);
bool WriteAll(int fd, std::string_view data);
// An HTTP/1.1 request with Connection: close; `key` (when not empty) as
// Idempotency-Key, sent verbatim; a JSON body for POST.
std::string RawRequest(std::string_view method, std::string_view target,
                       std::string_view key, std::string_view body);
// Reads one response from `fd` until `deadline`; nullopt on EOF before a
// whole response, an error or the deadline.
std::optional<HttpResponse> ReadResponse(int fd,
                                         SteadyClock::time_point deadline);
// Connects, sends, reads one response and closes.
std::optional<HttpResponse> Send(
    std::uint16_t port, std::string_view method, std::string_view target,
    std::string_view key, std::string_view body,
    std::chrono::seconds timeout = std::chrono::seconds(60));

// handler_runs from GET /stats, or -1.
int HandlerRuns(std::uint16_t port);

using ::idem::testing::WaitFor;

std::string ReadFile(const std::filesystem::path& path);

// A program run to its end: its exit status (nullopt: still running after
// the timeout, then killed, or killed by a signal), stdout and stderr.
struct ProgramRun {
  std::optional<int> exit_status;
  std::string out;
  std::string err;
};
// Runs `binary` with `args` (IDEM_STORE removed from its environment) in
// `cwd` (when not empty), its stdout and stderr into files of `dir`.
ProgramRun RunProgram(const std::string& binary,
                      const std::vector<std::string>& args,
                      const std::filesystem::path& dir,
                      const std::filesystem::path& cwd = {},
                      std::chrono::seconds timeout = std::chrono::seconds(60));

// One idem-demo process: `binary --listen 127.0.0.1:0 --store <store_uri>`
// plus `extra_args`, stdout read for the "listening on" line, stderr
// appended to `log`. IDEM_STORE is removed from its environment so that only
// --store chooses the store. Killed (SIGKILL) and reaped by the destructor.
class DemoProcess {
 public:
  DemoProcess(const std::string& binary, const std::string& store_uri,
              const std::filesystem::path& log,
              const std::vector<std::string>& extra_args = {});
  ~DemoProcess();
  DemoProcess(const DemoProcess&) = delete;
  DemoProcess& operator=(const DemoProcess&) = delete;

  // The port from "listening on 127.0.0.1:PORT", or 0 after EOF, another
  // line or the timeout.
  std::uint16_t WaitListening(
      std::chrono::seconds timeout = std::chrono::seconds(120));

  // SIGKILL, then reap: when this returns the process is gone and its file
  // locks and connections are released.
  void Kill();

  // Sends `signal` (SIGTERM: a clean stop) to the process.
  void Signal(int signal);
  // Its exit status once it exited within `timeout` (then reaped); nullopt
  // when it still runs (it is left running) or died of a signal.
  std::optional<int> Wait(
      std::chrono::seconds timeout = std::chrono::seconds(120));

  // What it wrote to stdout after the "listening on" line; complete once
  // it exited (Wait, Kill), else what is there now.
  std::string RestOfStdout();

  // The process id (for /proc/<pid>/status), -1 when it did not start.
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::optional<int> status_;  // waitpid's, once reaped by Wait.
};

}  // namespace idem::testing::proc

#endif  // IDEM_TESTS_SUPPORT_DEMO_PROCESS_H_
