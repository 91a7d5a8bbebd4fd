// The logging hook. idem prints nothing by itself: it hands warnings and
// errors to a callback the application installs. Messages never contain a
// client key, a scope or a body; they name records by their id (a hash).
//
// Repeated messages are aggregated (LogRateLimiter): a store that fails under
// load logs one line per kind of message per interval with a count, not one
// line per request. The Guard does this by default
// (GuardSetup::log_repeat_interval).
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
#include <utility>
#include <vector>

#include "idem/clock.h"

namespace idem {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

std::string_view LogLevelName(LogLevel level);

using LogSink = std::function<void(LogLevel level, std::string_view message)>;

// Forwards messages to a sink, at most one line per kind per interval. A
// kind is the level plus the message's shape: the message with every number
// and short hex id replaced by '#' ("response of 17 bytes ..., record
// 3fa9..." and "response of 20 bytes ..., record 77c0..." are one kind). A
// whole record id (64 hex digits, as the damaged-record error gives it for
// the operator to revoke) stays part of the shape, so each such record gets
// its own line.
//
//  - The first message of a kind is forwarded at once and opens a window of
//    `interval`.
//  - Messages of that kind inside the window are counted, not forwarded.
//  - The first one after the window is forwarded with
//    " (repeated N times in the last <interval>)" appended when N > 0, and
//    opens the next window.
//  - A kind whose window ended with a count and that then fell silent gets
//    that line (with its latest message) at the next call of any kind after
//    its window, at Flush, or at destruction; counts are never lost.
//
// At most `max_kinds` kinds are tracked; messages of further kinds while
// that many windows are open share one overflow kind, so memory is bounded
// whatever the messages say. Time comes from `clock` (ManualClock in tests).
class LogRateLimiter {
 public:
  // Default interval: 10 s. Default max_kinds: 256. An interval of 0
  // forwards everything.
  LogRateLimiter(LogSink sink, std::shared_ptr<Clock> clock,
                 Duration interval = std::chrono::seconds(10),
                 std::size_t max_kinds = 256);
  // Writes the pending counts (Flush).
  ~LogRateLimiter();
  LogRateLimiter(const LogRateLimiter&) = delete;
  LogRateLimiter& operator=(const LogRateLimiter&) = delete;

  void Log(LogLevel level, std::string_view message);
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
  // Moves lines for ended windows into `out` and forgets those windows.
  void SweepLocked(TimePoint now, std::vector<Line>& out);

  const LogSink sink_;
  const std::shared_ptr<Clock> clock_;
  const Duration interval_;
  const std::size_t max_kinds_;
  std::mutex mu_;  // Guards the members below; never held while logging.
  std::map<Kind, Window> windows_;
  TimePoint next_sweep_{};
};

// A LogSink that forwards to `sink` through a shared LogRateLimiter.
LogSink RateLimitedLogSink(LogSink sink, std::shared_ptr<Clock> clock,
                           Duration interval = std::chrono::seconds(10));

}  // namespace idem

#endif  // IDEM_LOG_H_
