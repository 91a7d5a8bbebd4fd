// A fresh directory under the system temp dir ($TMPDIR or /tmp), removed
// with everything in it when the object goes: what every test that writes
// files (stores, demo processes) works in.

#ifndef IDEM_TESTS_SUPPORT_TEMP_DIR_H_
#define IDEM_TESTS_SUPPORT_TEMP_DIR_H_

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace idem::testing {

class TempDir {
 public:
  // Named `<prefix>-XXXXXX`; aborts when no directory can be made (a test
  // cannot go on without it).
  explicit TempDir(std::string_view prefix = "idem-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// What a test reads back to see that nothing was written: the bytes of
// `path` ("" when it cannot be read), and the names in `dir`, sorted.
std::string FileBytes(const std::filesystem::path& path);
std::vector<std::string> DirectoryEntries(const std::filesystem::path& dir);

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_TEMP_DIR_H_
