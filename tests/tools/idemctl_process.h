// Runs the built idemctl binary as a child process, for the idemctl tests:
// its exit status, stdout and stderr.
//
// Thread-safety: RunIdemctl may be called from any thread.

#ifndef IDEM_TESTS_TOOLS_IDEMCTL_PROCESS_H_
#define IDEM_TESTS_TOOLS_IDEMCTL_PROCESS_H_

#include <string>
#include <vector>

namespace idem::testing {

struct ToolResult {
  int exit_code = -1;  // -1: it did not exit by itself in time (killed).
  std::string out;
  std::string err;
};

// `binary args...` with IDEM_STORE removed from the environment and `env`
// ("NAME=value") added; waits (bounded, generously) for it to exit.
ToolResult RunTool(const std::string& binary,
                   const std::vector<std::string>& args,
                   const std::vector<std::string>& env = {});

// "exit N", stdout and stderr, for a failure message.
std::string Describe(const ToolResult& r);

}  // namespace idem::testing

#endif  // IDEM_TESTS_TOOLS_IDEMCTL_PROCESS_H_
