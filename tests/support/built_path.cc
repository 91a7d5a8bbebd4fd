#include "support/built_path.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <system_error>

namespace idem::testing {
namespace {

std::filesystem::path FindBuildRoot() {
  std::error_code ec;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    std::fprintf(stderr, "BuiltPath: cannot read /proc/self/exe: %s\n",
                 ec.message().c_str());
    std::abort();
  }
  for (std::filesystem::path dir = self.parent_path();
       !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
    if (std::filesystem::exists(dir / "CMakeCache.txt", ec)) return dir;
  }
  std::fprintf(stderr,
               "BuiltPath: %s is not inside a CMake build tree (no "
               "CMakeCache.txt above it)\n",
               self.c_str());
  std::abort();
}

}  // namespace

const char* BuiltPath(const char* from_build_root) {
  static const std::filesystem::path root = FindBuildRoot();
  static std::mutex mu;
  static std::map<std::string, std::string> resolved;  // Nodes never move.
  std::lock_guard<std::mutex> lock(mu);
  auto [it, fresh] = resolved.try_emplace(from_build_root);
  if (fresh) {
    it->second = (root / from_build_root).lexically_normal().string();
  }
  return it->second.c_str();
}

}  // namespace idem::testing
