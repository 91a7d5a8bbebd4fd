#include "support/full_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/response.h"
#include "idem/types.h"
#include "support/wait_for.h"

extern char** environ;

namespace idem::testing {

std::unique_ptr<TmpfsMount> TmpfsMount::Mount(std::size_t bytes,
                                              std::string* why_not) {
  if (::geteuid() != 0) {
    *why_not = "not running as root";
    return nullptr;
  }
  std::string pattern =
      (std::filesystem::temp_directory_path() / "idem-tmpfs-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    *why_not = std::string("mkdtemp: ") + std::strerror(errno);
    return nullptr;
  }
  const std::string options = "size=" + std::to_string(bytes) + ",mode=0700";
  if (::mount("tmpfs", pattern.c_str(), "tmpfs", 0, options.c_str()) != 0) {
    *why_not = "mount -t tmpfs -o " + options + " " + pattern + ": " +
               std::strerror(errno);
    ::rmdir(pattern.c_str());
    return nullptr;
  }
  return std::unique_ptr<TmpfsMount>(new TmpfsMount(pattern));
}

TmpfsMount::~TmpfsMount() {
  ::umount2(path_.c_str(), MNT_DETACH);
  ::rmdir(path_.c_str());
}

bool RunningUnderCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string_view(ci) == "true";
}

std::filesystem::path FillFilesystem(const std::filesystem::path& dir,
                                     std::string_view name) {
  const std::filesystem::path path = dir / std::string(name);
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  const std::string chunk(64 * 1024, 'f');
  // Bounded: a filesystem this test mounts holds far fewer chunks.
  for (int i = 0; i < (1 << 20); ++i) {
    const ssize_t n = ::write(fd, chunk.data(), chunk.size());
    if (n >= 0) continue;  // A short write: the next one reports ENOSPC.
    if (errno == EINTR) continue;
    if (errno == ENOSPC) break;
    std::abort();
  }
  ::close(fd);
  return path;
}

std::string ChildResult::Describe() const {
  std::string what;
  if (timed_out) {
    what = "timed out and was killed";
  } else if (exited) {
    what = "exited with " + std::to_string(exit_code);
  } else {
    what = "was killed by signal " + std::to_string(signal) + " (" +
           ::strsignal(signal) + ")";
  }
  return "child " + what + "; its output:\n" + output;
}

ChildResult RunTestInChild(std::string_view test_name,
                           const std::vector<std::string>& env,
                           std::chrono::seconds timeout) {
  ChildResult result;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) std::abort();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=" + std::string(test_name);
  std::string also = "--gtest_also_run_disabled_tests";
  std::vector<char*> argv = {self.data(), filter.data(), also.data(), nullptr};
  std::vector<std::string> env_strings = env;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, self.c_str(), &actions, nullptr,
                               argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    result.output = std::string("posix_spawn: ") + std::strerror(rc);
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int ready = ::poll(
        &p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

namespace {

template <typename IdType>
IdType MakeBytes(std::uint64_t n, std::uint64_t salt) {
  IdType out;
  std::uint64_t state = n * 0x9E3779B97F4A7C15ull + salt;
  for (std::size_t i = 0; i < IdType::kSize; i += 8) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(out.bytes.data() + i, &z, 8);
  }
  return out;
}

struct Completed {
  std::uint64_t n;
  Response response;
};

// The workload's shared state: what was completed, which errors were seen.
class Ledger {
 public:
  explicit Ledger(TimePoint now) : now_(now) {}

  TimePoint now() const { return now_; }

  // Claims id n and completes it with a body of `body_size` bytes. Returns
  // whether both succeeded; a failure must be kUnavailable (checked here).
  bool ClaimAndComplete(Store& store, std::uint64_t n, std::size_t body_size) {
    const RecordId id = MakeBytes<RecordId>(n, 1);
    const Fingerprint fp = MakeBytes<Fingerprint>(n, 2);
    auto claim = store.Claim(id, fp, now_, std::chrono::hours(24),
                             std::chrono::seconds(60));
    if (!claim) return Failed(claim.error(), "claim");
    if (claim->outcome != ClaimOutcome::kAcquired) {
      ADD_FAILURE() << "a fresh id was not acquired: "
                    << ClaimOutcomeName(claim->outcome);
      return false;
    }
    Response response{
        .status = 201,
        .headers = {{"Content-Type", "text/plain"}},
        .body = std::to_string(n) + ":" + std::string(body_size, 'b')};
    auto done = store.Complete(id, claim->token, response);
    if (!done) return Failed(done.error(), "complete");
    if (!*done) {
      ADD_FAILURE() << "Complete of a claim just acquired returned false";
      return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    completed_.push_back({n, std::move(response)});
    return true;
  }

  int failures() const { return failures_.load(); }

  // Every completed record replays its response.
  void ExpectReplays(Store& store, std::string_view when) {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t ok = 0;
    for (const Completed& c : completed_) {
      auto claim = store.Claim(
          MakeBytes<RecordId>(c.n, 1), MakeBytes<Fingerprint>(c.n, 2), now_,
          std::chrono::hours(24), std::chrono::seconds(60));
      if (!claim) {
        ADD_FAILURE() << when << ": replay of record " << c.n
                      << " failed: " << claim.error().ToString();
        continue;
      }
      if (claim->outcome != ClaimOutcome::kCompleted ||
          claim->response == nullptr || *claim->response != c.response) {
        ADD_FAILURE() << when << ": record " << c.n
                      << " completed but does not replay (outcome "
                      << ClaimOutcomeName(claim->outcome) << ")";
        continue;
      }
      ++ok;
    }
    std::cout << when << ": " << ok << " of " << completed_.size()
              << " completed records replay" << std::endl;
  }

 private:
  bool Failed(const Error& error, std::string_view op) {
    failures_.fetch_add(1);
    EXPECT_EQ(error.code(), ErrorCode::kUnavailable)
        << op << " on a full disk: " << error.ToString();
    return false;
  }

  const TimePoint now_;
  std::atomic<int> failures_{0};
  std::mutex mu_;
  std::vector<Completed> completed_;
};

}  // namespace

void FullDiskWorkload(const std::function<std::unique_ptr<Store>()>& open,
                      const std::filesystem::path& dir) {
  std::unique_ptr<Store> store = open();
  ASSERT_NE(store, nullptr);
  Ledger ledger(SystemClock::Instance()->Now());
  std::uint64_t next = 1;

  // 1. On free space.
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(ledger.ClaimAndComplete(*store, next++, 100));
  }

  // 2. + 3. On a full disk: one client, then four threads.
  const std::filesystem::path filler = FillFilesystem(dir);
  for (int i = 0; i < 100; ++i) {
    ledger.ClaimAndComplete(*store, next++, 4096);
  }
  const int single_client_failures = ledger.failures();
  std::atomic<std::uint64_t> shared_next{next};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        ledger.ClaimAndComplete(*store, shared_next.fetch_add(1), 4096);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  next = shared_next.load();
  std::cout << "full disk: " << single_client_failures
            << " failed calls from one client, "
            << ledger.failures() - single_client_failures
            << " from four threads" << std::endl;
  EXPECT_GT(single_client_failures, 0)
      << "the filesystem was full, yet every write of one client succeeded: "
         "the test did not test";

  // 4. Space is back: the store recovers by itself.
  std::error_code ec;
  ASSERT_TRUE(std::filesystem::remove(filler, ec)) << ec.message();
  int attempts = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        ++attempts;
        return ledger.ClaimAndComplete(*store, next++, 4096);
      },
      std::chrono::seconds(60), std::chrono::milliseconds(50)))
      << "still failing 60 s after the space came back";
  std::cout << "recovered after " << attempts << " attempt(s)" << std::endl;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(ledger.ClaimAndComplete(*store, next++, 4096)) << i;
  }

  // 5. Nothing completed is lost, also across a reopen.
  ledger.ExpectReplays(*store, "after recovery");
  store.reset();
  store = open();
  ASSERT_NE(store, nullptr);
  ledger.ExpectReplays(*store, "after reopening");
}

void FullDiskShutdownWorkload(
    const std::function<std::unique_ptr<Store>()>& open,
    const std::filesystem::path& dir) {
  std::unique_ptr<Store> store = open();
  ASSERT_NE(store, nullptr);
  Ledger ledger(SystemClock::Instance()->Now());
  std::uint64_t next = 1;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(ledger.ClaimAndComplete(*store, next++, 100));
  }
  const std::filesystem::path filler = FillFilesystem(dir);
  for (int i = 0; i < 50; ++i) ledger.ClaimAndComplete(*store, next++, 4096);
  EXPECT_GT(ledger.failures(), 0) << "the filesystem was full, yet every "
                                     "write succeeded: the test did not test";
  store.reset();  // Closing on a full disk.
  std::error_code ec;
  ASSERT_TRUE(std::filesystem::remove(filler, ec)) << ec.message();
  store = open();
  ASSERT_NE(store, nullptr);
  ledger.ExpectReplays(*store, "reopened after closing on a full disk");
  EXPECT_TRUE(ledger.ClaimAndComplete(*store, next++, 100));
}

void RunFullDiskWorkloadInChild(FullDiskWorkloadFn workload,
                                std::string_view file_name,
                                const OpenStoreAt& open_at) {
  const char* dir = std::getenv(kFullDiskDirEnv);
  if (dir == nullptr) GTEST_SKIP() << kFullDiskDirEnv << " not set";
  const std::string path = (std::filesystem::path(dir) / file_name).string();
  workload(
      [&]() -> std::unique_ptr<Store> {
        auto store = open_at(path);
        EXPECT_TRUE(store.has_value()) << store.error().ToString();
        return store ? std::move(*store) : nullptr;
      },
      dir);
}

void ExpectFullDiskChildPasses(std::string_view helper_test) {
  std::unique_ptr<TmpfsMount> mount;
  IDEM_MOUNT_TMPFS_OR_SKIP(mount, 16u << 20);
  const ChildResult child = RunTestInChild(
      helper_test,
      {std::string(kFullDiskDirEnv) + "=" + mount->path().string()},
      std::chrono::seconds(240));
  EXPECT_TRUE(child.exited && child.exit_code == 0) << child.Describe();
  EXPECT_NE(child.output.find("[  PASSED  ] 1 test"), std::string::npos)
      << child.Describe();
}

}  // namespace idem::testing
