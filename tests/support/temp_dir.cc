#include "support/temp_dir.h"

#include <stdlib.h>

#include <cstdlib>
#include <string>
#include <system_error>

namespace idem::testing {

TempDir::TempDir(std::string_view prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() /
                         (std::string(prefix) + "-XXXXXX"))
                            .string();
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace idem::testing
