// For the tests of a durable store on a full filesystem (issue #8, §1): a
// small tmpfs mounted by the test, a file that fills it, the test binary
// re-run in a child process (so that a store that aborts the process is
// reported by the parent instead of killing the suite), and the workload
// every durable store must survive.

#ifndef IDEM_TESTS_SUPPORT_FULL_DISK_H_
#define IDEM_TESTS_SUPPORT_FULL_DISK_H_

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.h"
#include "idem/store.h"

namespace idem::testing {

// The environment variable that hands the child the directory to work in.
inline constexpr char kFullDiskDirEnv[] = "IDEM_TEST_FULL_DISK_DIR";

// A tmpfs of a given size mounted at a fresh directory; unmounted (lazily,
// so that a file still open cannot keep it) and removed when the object
// goes. Needs root (CAP_SYS_ADMIN).
class TmpfsMount {
 public:
  // The mount, or null with `*why_not` set (not root, mount(2) refused).
  static std::unique_ptr<TmpfsMount> Mount(std::size_t bytes,
                                           std::string* why_not);
  ~TmpfsMount();
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TmpfsMount(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

// Mounts a tmpfs of `bytes` into `mount` or returns from the calling test:
// skipped with a message when it cannot (not root), failed instead when
// CI=true (CI runs as root, so a skip there would hide the test).
#define IDEM_MOUNT_TMPFS_OR_SKIP(mount, bytes)                               \
  do {                                                                       \
    std::string idem_why_not;                                                \
    mount = ::idem::testing::TmpfsMount::Mount((bytes), &idem_why_not);      \
    if (mount == nullptr) {                                                  \
      if (::idem::testing::RunningUnderCi()) {                               \
        FAIL() << "CI=true but no tmpfs could be mounted: " << idem_why_not; \
      }                                                                      \
      GTEST_SKIP() << "needs a tmpfs mounted by the test (run as root): "    \
                   << idem_why_not;                                          \
    }                                                                        \
  } while (0)

// Whether CI=true is set.
bool RunningUnderCi();

// Writes a file `name` in `dir` until the filesystem refuses a write with
// ENOSPC (aborts on any other error); returns its path. Removing the file
// gives the space back.
std::filesystem::path FillFilesystem(const std::filesystem::path& dir,
                                     std::string_view name = "filler");

struct ChildResult {
  bool exited = false;  // Exited on its own (else killed by a signal).
  int exit_code = -1;   // When exited.
  int signal = 0;       // When not exited: the signal that ended it.
  bool timed_out = false;
  std::string output;  // Its stdout and stderr, interleaved.
  std::string Describe() const;
};

// Runs this test binary again with only `test_name` (usually a DISABLED_
// test, run with --gtest_also_run_disabled_tests) and `env` ("NAME=value")
// added to this process's environment; returns once it has ended, after
// SIGKILLing it if it runs longer than `timeout`.
ChildResult RunTestInChild(std::string_view test_name,
                           const std::vector<std::string>& env,
                           std::chrono::seconds timeout);

// The full-disk workload, with gtest assertions, run in the child on a store
// whose files are on the tmpfs at `dir` (`open` opens it there, again after
// a close). In order:
//  1. 40 records are claimed and completed on free space;
//  2. the filesystem is filled (FillFilesystem);
//  3. one client, then four threads, claim fresh ids and complete them with
//     4 KiB bodies: every error must be kUnavailable (anything else, or a
//     crash, fails), and at least one call must fail;
//  4. the space is freed: within a bounded retry loop (up to 60 s) a claim
//     and its Complete succeed again, then 20 more in a row;
//  5. every record completed in 1 and every Complete that returned true in 3
//     and 4 replays its response, and again after closing and reopening.
void FullDiskWorkload(const std::function<std::unique_ptr<Store>()>& open,
                      const std::filesystem::path& dir);

// A server shut down while its disk is full: 20 records are completed, the
// filesystem is filled, writes fail (kUnavailable only), and the store is
// closed (destroyed) while the disk is still full, which must not crash.
// Once the space is freed the store opens again and every completed record
// replays.
void FullDiskShutdownWorkload(
    const std::function<std::unique_ptr<Store>()>& open,
    const std::filesystem::path& dir);

// Opens a durable store whose files are at `path` (on the tmpfs).
using OpenStoreAt =
    std::function<Result<std::unique_ptr<Store>>(const std::string& path)>;

// A workload above: FullDiskWorkload or FullDiskShutdownWorkload.
using FullDiskWorkloadFn =
    void (*)(const std::function<std::unique_ptr<Store>()>& open,
             const std::filesystem::path& dir);

// The body of a DISABLED_ helper test, the child's side: runs `workload` on
// the store `open_at` opens at `file_name` in the directory kFullDiskDirEnv
// names (again at each reopen; an open that fails fails the test). Skips
// when kFullDiskDirEnv is not set (the helper run on its own).
void RunFullDiskWorkloadInChild(FullDiskWorkloadFn workload,
                                std::string_view file_name,
                                const OpenStoreAt& open_at);

// The body of a full-disk test, the parent's side: mounts a 16 MiB tmpfs
// (IDEM_MOUNT_TMPFS_OR_SKIP) and runs the helper test `helper_test` in a
// child with kFullDiskDirEnv set to it; expects the child to exit 0 having
// passed its one test, within 240 s.
void ExpectFullDiskChildPasses(std::string_view helper_test);

}  // namespace idem::testing

// The full-disk tests of a durable store, four TESTs named after `prefix`:
//  - prefix##FullDiskTest.FailsWithUnavailableAndRecoversWhenSpaceReturns:
//    on a full filesystem every failed write is kUnavailable (the Guard
//    answers 503), nothing aborts the process, the store recovers by itself
//    once space is back, and no completed record is lost (also across a
//    reopen): FullDiskWorkload;
//  - prefix##FullDiskTest.ClosingOnAFullDiskLosesNothing: a server stopped
//    while the disk is full; closing does not crash, and the completed
//    records are all there once it opens again with space back:
//    FullDiskShutdownWorkload;
//  - prefix##FullDiskHelper.DISABLED_Workload and .DISABLED_Shutdown, not
//    tests on their own: the child processes of those two (run with
//    --gtest_also_run_disabled_tests and kFullDiskDirEnv set), so that a
//    store that aborts the process kills the child only.
// `file_name` is the store's file (or directory) in the tmpfs, `open_at` an
// OpenStoreAt that opens the store there.
#define IDEM_FULL_DISK_TESTS(prefix, file_name, open_at)                    \
  TEST(prefix##FullDiskHelper, DISABLED_Workload) {                         \
    ::idem::testing::RunFullDiskWorkloadInChild(                            \
        ::idem::testing::FullDiskWorkload, (file_name), (open_at));         \
  }                                                                         \
  TEST(prefix##FullDiskTest,                                                \
       FailsWithUnavailableAndRecoversWhenSpaceReturns) {                   \
    ::idem::testing::ExpectFullDiskChildPasses(                             \
        #prefix "FullDiskHelper.DISABLED_Workload");                        \
  }                                                                         \
  TEST(prefix##FullDiskHelper, DISABLED_Shutdown) {                         \
    ::idem::testing::RunFullDiskWorkloadInChild(                            \
        ::idem::testing::FullDiskShutdownWorkload, (file_name), (open_at)); \
  }                                                                         \
  TEST(prefix##FullDiskTest, ClosingOnAFullDiskLosesNothing) {              \
    ::idem::testing::ExpectFullDiskChildPasses(                             \
        #prefix "FullDiskHelper.DISABLED_Shutdown");                        \
  }

#endif  // IDEM_TESTS_SUPPORT_FULL_DISK_H_
