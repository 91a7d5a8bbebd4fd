#include "support/shell_command.h"

#include <sys/wait.h>

#include <cstdio>

namespace idem::testing {

bool RunShellCommand(const std::string& line, std::string* out,
                     std::string* error) {
  FILE* pipe = ::popen(line.c_str(), "r");
  if (pipe == nullptr) {
    *error = "popen failed";
    return false;
  }
  std::string text;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) text += buf;
  const int status = ::pclose(pipe);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.pop_back();
  }
  if (out != nullptr) *out = text;
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = "failed (status " + std::to_string(status) + "): " + text;
    return false;
  }
  return true;
}

}  // namespace idem::testing
