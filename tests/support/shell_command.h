// Runs a shell command line for a test (a server script: scripts/redis.sh,
// scripts/postgres.sh) and captures its standard output; its standard error
// stays the test's, so the script's own messages reach the test log.
//
// Thread-safety: may be called from any thread.

#ifndef IDEM_TESTS_SUPPORT_SHELL_COMMAND_H_
#define IDEM_TESTS_SUPPORT_SHELL_COMMAND_H_

#include <string>

namespace idem::testing {

// Runs `line` with /bin/sh (popen). True when it exited with status 0. Its
// stdout, without trailing newlines and spaces, goes to *out (when not
// null) either way; on false, *error says how it ended and what it printed.
bool RunShellCommand(const std::string& line, std::string* out,
                     std::string* error);

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_SHELL_COMMAND_H_
