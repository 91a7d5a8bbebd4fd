#include "support/spawn_args.h"

#include <string_view>
#include <utility>

extern char** environ;

namespace idem::testing {

SpawnArgs::SpawnArgs(std::vector<std::string> args,
                     std::vector<std::string> env)
    : args_(std::move(args)), env_(std::move(env)) {
  // The test's variables first: getenv finds the first of a name.
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("IDEM_STORE=")) continue;
    env_.emplace_back(*e);
  }
  for (auto& a : args_) argv_.push_back(a.data());
  argv_.push_back(nullptr);
  for (auto& e : env_) envp_.push_back(e.data());
  envp_.push_back(nullptr);
}

}  // namespace idem::testing
