// What posix_spawn takes to start a program the tests run (idem-demo,
// idemctl): its argv, and an environment that is the test's own without
// IDEM_STORE (the programs take their store from it, and a store the
// developer exported must not leak into a test) plus the variables the
// test sets, which take precedence.
//
// Thread-safety: reads `environ` while constructed; not thread-safe with a
// concurrent setenv.

#ifndef IDEM_TESTS_SUPPORT_SPAWN_ARGS_H_
#define IDEM_TESTS_SUPPORT_SPAWN_ARGS_H_

#include <string>
#include <vector>

namespace idem::testing {

class SpawnArgs {
 public:
  // `args`: argv[0] (the program) first. `env`: NAME=value entries.
  explicit SpawnArgs(std::vector<std::string> args,
                     std::vector<std::string> env = {});
  SpawnArgs(const SpawnArgs&) = delete;
  SpawnArgs& operator=(const SpawnArgs&) = delete;

  // Null-terminated; valid while this object lives.
  char* const* argv() const { return argv_.data(); }
  char* const* envp() const { return envp_.data(); }

 private:
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_SPAWN_ARGS_H_
