// FileDescriptorLogSink: log lines written to a file descriptor, one write(2)
// per line (log.h). Thread-safety: the sink may be called from any thread.

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "idem/log.h"

namespace idem {
namespace {

// The most a pipe writes atomically: a longer line is cut to this.
constexpr std::size_t kMaxLine = PIPE_BUF;
constexpr std::string_view kCut = "...";

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

// Appends `message` with every control character written as \xHH, so a
// line is one line whatever a server's error text holds.
void AppendEscaped(std::string_view message, std::string& out) {
  for (const char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (!IsControl(c)) {
      out += ch;
      continue;
    }
    char hex[5];
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    out += hex;
  }
}

// One write(2) for the line: lines of several threads (or processes, up to
// PIPE_BUF) never interleave. The loop only continues a partial write, which
// a pipe or file does not make for a line this short unless a signal or a
// full disk interrupts it.
void WriteLine(int fd, const std::string& line) {
  // Inside this process lines stay whole even on a descriptor that does not
  // write atomically (a socket) or after a partial write.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // A closed pipe or a full disk: the line is lost.
    }
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

std::string FormatLogLine(std::string_view program, LogLevel level,
                          std::string_view message) {
  std::string line;
  line.reserve(program.size() + message.size() + 16);
  line.append(program).append(": ").append(LogLevelName(level)).append(": ");
  AppendEscaped(message, line);
  if (line.size() + 1 > kMaxLine) {
    line.resize(kMaxLine - 1 - kCut.size());
    // Not in the middle of an escape or a UTF-8 sequence: cut at the start
    // of the character the limit falls in.
    while (!line.empty() &&
           (static_cast<unsigned char>(line.back()) & 0xc0) == 0x80) {
      line.pop_back();
    }
    if (!line.empty() && (static_cast<unsigned char>(line.back()) & 0x80)) {
      line.pop_back();
    }
    const std::size_t escape = line.rfind('\\');
    if (escape != std::string::npos && line.size() - escape < 4) {
      line.resize(escape);
    }
    line.append(kCut);
  }
  line += '\n';
  return line;
}

LogSink FileDescriptorLogSink(int fd, std::string program, LogLevel min_level) {
  return [fd, program = std::move(program), min_level](
             LogLevel level, std::string_view message) {
    if (level < min_level) return;
    WriteLine(fd, FormatLogLine(program, level, message));
  };
}

}  // namespace idem
