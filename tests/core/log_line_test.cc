// FileDescriptorLogSink: one write(2) per line, so that lines written at once
// by many threads arrive whole (issue 28 #11: "idem-demo: warningidem-demo:
// warning: ..."), and a line is one line whatever the message holds.

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/log.h"
#include "support/temp_dir.h"

namespace idem {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kThreads = 16;
constexpr int kLinesPerThread = 400;

// The message thread `t` writes as its line `i`: long enough (~1.5 KB) that
// a writer splitting it would be caught.
std::string Message(int t, int i) {
  return "thread " + std::to_string(t) + " line " + std::to_string(i) + " " +
         std::string(1500, static_cast<char>('a' + t % 26)) + " end";
}

// Many threads log through one sink.
void LogFromManyThreads(const LogSink& sink) {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&sink, t] {
      for (int i = 0; i < kLinesPerThread; ++i) {
        sink(LogLevel::kWarning, Message(t, i));
      }
    });
  }
  for (auto& th : threads) th.join();
}

// Every line is one whole message: the prefix, the message unbroken, and
// each message exactly once.
void ExpectWholeLines(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    ASSERT_THAT(line, StartsWith("idem-test: warning: thread "));
    const std::string message =
        line.substr(std::string("idem-test: warning: ").size());
    std::istringstream words(message);
    std::string word;
    int t = -1;
    int i = -1;
    words >> word >> t >> word >> i;
    ASSERT_EQ(message, Message(t, i)) << "a line was broken or interleaved";
    EXPECT_TRUE(seen.insert(message).second)
        << "written twice: " << t << "/" << i;
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(kThreads * kLinesPerThread));
}

TEST(FileDescriptorLogSinkTest, LinesFromManyThreadsIntoAPipeStayWhole) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::string text;
  std::thread reader([&] {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
  });
  LogFromManyThreads(FileDescriptorLogSink(fds[1], "idem-test"));
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  ExpectWholeLines(text);
}

TEST(FileDescriptorLogSinkTest, LinesFromManyThreadsIntoAFileStayWhole) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "log").string();
  // As a shell's `2> file` opens it: no O_APPEND, one shared offset.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  LogFromManyThreads(FileDescriptorLogSink(fd, "idem-test"));
  ::close(fd);
  const int in = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(in, 0);
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = ::read(in, buf, sizeof buf)) > 0;) {
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(in);
  ExpectWholeLines(text);
}

TEST(FileDescriptorLogSinkTest, AMessageIsOneLine) {
  EXPECT_EQ(FormatLogLine("idem-demo", LogLevel::kError, "a\nb\r\x1b[31m"),
            "idem-demo: error: a\\x0ab\\x0d\\x1b[31m\n");
  EXPECT_EQ(FormatLogLine("p", LogLevel::kInfo, "caf\xc3\xa9"),
            "p: info: caf\xc3\xa9\n");
}

TEST(FileDescriptorLogSinkTest, ALongLineIsCutToWhatAPipeWritesAtOnce) {
  const std::string line =
      FormatLogLine("p", LogLevel::kWarning, std::string(10000, 'x'));
  EXPECT_EQ(line.size(), static_cast<std::size_t>(PIPE_BUF));
  EXPECT_EQ(line.substr(line.size() - 4), "...\n");
  // Never in the middle of an escape or a UTF-8 character.
  for (int shift = 0; shift < 8; ++shift) {
    std::string message(PIPE_BUF - 20 + shift, 'x');
    message += std::string(20, '\n');
    const std::string cut = FormatLogLine("p", LogLevel::kWarning, message);
    EXPECT_LE(cut.size(), static_cast<std::size_t>(PIPE_BUF));
    EXPECT_THAT(cut, ::testing::AnyOf(::testing::EndsWith("x...\n"),
                                      ::testing::EndsWith("\\x0a...\n")));
  }
}

TEST(FileDescriptorLogSinkTest, LevelsBelowTheMinimumAreDropped) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const LogSink sink = FileDescriptorLogSink(fds[1], "p", LogLevel::kWarning);
  sink(LogLevel::kInfo, "dropped");
  sink(LogLevel::kError, "kept");
  ::close(fds[1]);
  char buf[256];
  const ssize_t n = ::read(fds[0], buf, sizeof buf);
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)), "p: error: kept\n");
}

}  // namespace
}  // namespace idem
