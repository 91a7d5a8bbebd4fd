// The logging hook. idem prints nothing by itself: it hands warnings and
// errors to a callback the application installs. Messages never contain a
// client key, a scope or a body; they name records by their id (a hash).
//
// Repeated messages are aggregated (LogRateLimiter): a store that fails under
// load logs one line per kind of message per interval with a count and one
// example, not one line per request. The Guard does this by default
// (GuardSetup::log_repeat_interval). FileDescriptorLogSink writes lines to
// a file descriptor, one write(2) each.
//
// Thread-safety: the sink is called from whatever thread hit the event, so it
// must be safe for concurrent calls. LogRateLimiter is safe for concurrent
// use.

#ifndef IDEM_LOG_H_
#define IDEM_LOG_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "idem/clock.h"

namespace idem {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

std::string_view LogLevelName(LogLevel level);

using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Forwards messages to a sink, at most one line per kind per interval. A
// kind is the level plus either the kind the caller names, or else the
// message's shape: the message with every number and hex id (a whole 64-digit
// record id included) replaced by '#' ("response of 17 bytes ..., record
// 3fa9..." and "response of 20 bytes ..., record 77c0..." are one kind). A
// caller that wants one line per record (the Guard, for a damaged record an
// operator must revoke) names a kind that contains the id.
//
//  - The first message of a kind is forwarded at once and opens a window of
//    `interval`.
//  - Messages of that kind inside the window are counted, not forwarded; the
//    latest is kept as the example (with its record id).
//  - When the window ends with a count N > 0, the example is forwarded with
//    " (repeated N times in the last <interval>)" appended, at that moment
//    (a thread of the limiter waits for it on `clock`; a ManualClock test
//    advances the clock), and the next window opens: a kind repeated without
//    pause gets one line per interval. A window that ends with no count
//    closes; the kind's next message is forwarded at once again.
//  - Flush and the destructor forward every pending count; counts are never
//    lost.
//
// At most `max_kinds` kinds are tracked; messages of further kinds while
// that many windows are open share one overflow kind, so memory is bounded
// whatever the messages say. Time comes from `clock` (ManualClock in tests).
//
// The sink is called by one thread at a time (a summary from the limiter's
// thread never runs alongside a line from a caller), and never with the
// limiter's own lock held; it must not call back into the limiter.
class LogRateLimiter {
 public:
  // Default interval: 10 s. Default max_kinds: 256. An interval of 0
  // forwards everything. The thread that writes summaries starts with the
  // first message that is counted rather than forwarded.
  LogRateLimiter(LogSink sink, std::shared_ptr<Clock> clock,
                 Duration interval = std::chrono::seconds(10),
                 std::size_t max_kinds = 256);
  // Stops the thread, then writes the pending counts (Flush).
  ~LogRateLimiter();
  LogRateLimiter(const LogRateLimiter&) = delete;
  LogRateLimiter& operator=(const LogRateLimiter&) = delete;

  // `kind`: the caller's name for the message's kind; empty: its Shape.
  void Log(LogLevel level, std::string_view message,
           std::string_view kind = {});
  // Forwards a line for every kind with a pending count, now.
  void Flush();

  // The shape of `message` (see above).
  static std::string Shape(std::string_view message);

 private:
  struct Window {
    TimePoint start;
    std::uint64_t suppressed = 0;
    std::string latest;  // The latest suppressed message.
  };
  using Kind = std::pair<LogLevel, std::string>;
  using Line = std::pair<LogLevel, std::string>;

  std::string Repeated(std::string_view message, std::uint64_t count) const;
  // Moves lines for ended windows into `out`: a window with a count opens
  // again at `now`, one without is forgotten.
  void SweepLocked(TimePoint now, std::vector<Line>& out);
  // The end of the earliest window with a count, TimePoint::max if none.
  TimePoint NextSummaryLocked() const;
  // Starts the thread, or wakes it when `due` is before what it waits for.
  void ScheduleLocked(TimePoint due);
  void Write(const std::vector<Line>& lines);
  void Loop();

  const LogSink sink_;
  const std::shared_ptr<Clock> clock_;
  const Duration interval_;
  const std::size_t max_kinds_;
  std::mutex sink_mu_;  // Held while the sink is called.
  std::mutex mu_;       // Guards the members below; never held while logging.
  std::map<Kind, Window> windows_;
  TimePoint next_sweep_{};
  // The summary thread: waits on waiter_ until waiting_until_.
  std::unique_ptr<ClockWaiter> waiter_;
  TimePoint waiting_until_ = TimePoint::max();
  bool stop_ = false;
  std::thread thread_;
};

// A LogSink that forwards to `sink` through a shared LogRateLimiter.
LogSink RateLimitedLogSink(LogSink sink, std::shared_ptr<Clock> clock,
                           Duration interval = std::chrono::seconds(10));

// A LogSink that writes "<program>: <level>: <message>\n" to `fd` (e.g.
// STDERR_FILENO) in one write(2) per line, so that lines written at once by
// many threads, or by processes sharing the pipe or an O_APPEND file, never
// interleave. For a line an operator's tools can parse, a control character
// in the message (a newline in a server's error text, say) is written as
// \xHH, and a line longer than PIPE_BUF (4096 bytes, the most a pipe writes
// atomically) is cut to that length, ending in "...". Messages below
// `min_level` are dropped. A write that fails (a closed pipe) loses that
// line and nothing else; EINTR is retried. The sink does not own `fd`.
// Default min_level: kInfo.
LogSink FileDescriptorLogSink(int fd, std::string program,
                              LogLevel min_level = LogLevel::kInfo);

// The line FileDescriptorLogSink writes for `message`, newline included.
std::string FormatLogLine(std::string_view program, LogLevel level,
                          std::string_view message);

}  // namespace idem

#endif  // IDEM_LOG_H_
