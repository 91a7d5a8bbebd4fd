#include "idemctl_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string_view>

#include "support/demo_process.h"
#include "support/spawn_args.h"
#include "support/temp_dir.h"
#include "support/wait_for.h"

namespace idem::testing {

std::string Describe(const ToolResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout: " + r.out +
         "\nstderr: " + r.err;
}

ToolResult RunTool(const std::string& binary,
                   const std::vector<std::string>& args,
                   const std::vector<std::string>& env) {
  TempDir dir("idemctl-run");
  const std::string out_path = (dir.path() / "out").string();
  const std::string err_path = (dir.path() / "err").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> argv{binary};
  argv.insert(argv.end(), args.begin(), args.end());
  const SpawnArgs spawn(std::move(argv), env);

  ToolResult result;
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr,
                             spawn.argv(), spawn.envp());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    result.err = "posix_spawn failed";
    return result;
  }
  int status = 0;
  const bool exited =
      WaitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; });
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }
  result.out = proc::ReadFile(out_path);
  result.err = proc::ReadFile(err_path);
  return result;
}

}  // namespace idem::testing
