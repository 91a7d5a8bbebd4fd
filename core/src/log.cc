#include "idem/log.h"

#include <algorithm>
#include <cctype>

namespace idem {
namespace {

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)); }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)); }
bool IsHex(char c) { return std::isxdigit(static_cast<unsigned char>(c)); }

// "10 s", "1500 ms": the interval as a person writes it.
std::string Describe(Duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d);
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  return std::to_string(ms.count()) + " ms";
}

}  // namespace

std::string LogRateLimiter::Shape(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  std::size_t i = 0;
  while (i < message.size()) {
    if (!IsAlnum(message[i])) {
      out += message[i++];
      continue;
    }
    std::size_t end = i;
    bool digit = false;
    bool hex = true;
    while (end < message.size() && IsAlnum(message[end])) {
      digit = digit || IsDigit(message[end]);
      hex = hex && IsHex(message[end]);
      ++end;
    }
    const std::string_view word = message.substr(i, end - i);
    if (hex && (digit || word.size() >= 16)) {
      // A number or an id, a whole record id included (even one that
      // happens to have no digit): the lines of one kind about many records
      // are one kind (a caller that wants a line per record names the
      // kind).
      out += '#';
    } else {
      // A word with digits inside ("x2", "v1beta"): only the digits vary.
      for (std::size_t j = 0; j < word.size(); ++j) {
        if (!IsDigit(word[j])) {
          out += word[j];
        } else if (j == 0 || !IsDigit(word[j - 1])) {
          out += '#';
        }
      }
    }
    i = end;
  }
  return out;
}

LogRateLimiter::LogRateLimiter(LogSink sink, std::shared_ptr<Clock> clock,
                               Duration interval, std::size_t max_kinds)
    : sink_(std::move(sink)),
      clock_(clock ? std::move(clock) : SystemClock::Instance()),
      interval_(interval),
      max_kinds_(max_kinds == 0 ? 1 : max_kinds) {}

LogRateLimiter::~LogRateLimiter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  if (thread_.joinable()) {
    waiter_->Wake();
    thread_.join();
  }
  Flush();
}

std::string LogRateLimiter::Repeated(std::string_view message,
                                     std::uint64_t count) const {
  return std::string(message) + " (repeated " + std::to_string(count) +
         (count == 1 ? " time" : " times") + " in the last " +
         Describe(interval_) + ")";
}

void LogRateLimiter::SweepLocked(TimePoint now, std::vector<Line>& out) {
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (now - it->second.start < interval_) {
      ++it;
      continue;
    }
    if (it->second.suppressed == 0) {
      it = windows_.erase(it);
      continue;
    }
    out.emplace_back(it->first.first,
                     Repeated(it->second.latest, it->second.suppressed));
    // Still repeating: the next window counts from now, so a steady stream
    // gets one line per interval.
    it->second = Window{now, 0, {}};
    ++it;
  }
}

TimePoint LogRateLimiter::NextSummaryLocked() const {
  TimePoint next = TimePoint::max();
  for (const auto& [kind, window] : windows_) {
    if (window.suppressed > 0) next = std::min(next, window.start + interval_);
  }
  return next;
}

void LogRateLimiter::ScheduleLocked(TimePoint due) {
  if (stop_) return;
  if (!thread_.joinable()) {
    waiter_ = clock_->NewWaiter();
    waiting_until_ = due;
    thread_ = std::thread([this] { Loop(); });
    return;
  }
  if (due < waiting_until_) {
    waiting_until_ = due;
    waiter_->Wake();
  }
}

void LogRateLimiter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    std::vector<Line> out;
    SweepLocked(clock_->Now(), out);
    waiting_until_ = NextSummaryLocked();
    const TimePoint deadline = waiting_until_;
    lock.unlock();
    Write(out);
    waiter_->WaitUntil(deadline);
    lock.lock();
  }
}

void LogRateLimiter::Write(const std::vector<Line>& lines) {
  if (lines.empty()) return;
  std::lock_guard<std::mutex> lock(sink_mu_);
  for (const auto& [level, line] : lines) sink_(level, line);
}

void LogRateLimiter::Log(LogLevel level, std::string_view message,
                         std::string_view kind_name) {
  if (!sink_) return;
  if (interval_ <= Duration::zero()) {
    std::lock_guard<std::mutex> lock(sink_mu_);
    sink_(level, message);
    return;
  }
  const TimePoint now = clock_->Now();
  std::vector<Line> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Kind kind(level,
              kind_name.empty() ? Shape(message) : std::string(kind_name));
    auto it = windows_.find(kind);
    if (it == windows_.end() && windows_.size() >= max_kinds_) {
      SweepLocked(now, out);
      if (windows_.size() >= max_kinds_) {
        kind.second = "(other messages)";
      }
      it = windows_.find(kind);
    }
    if (it == windows_.end()) {
      windows_.emplace(std::move(kind), Window{now, 0, {}});
      out.emplace_back(level, std::string(message));
    } else if (now - it->second.start < interval_) {
      if (it->second.suppressed++ == 0) {
        ScheduleLocked(it->second.start + interval_);
      }
      it->second.latest.assign(message);
    } else {
      // Ended before the thread wrote it (it runs a little later).
      const std::uint64_t count = it->second.suppressed;
      out.emplace_back(
          level, count > 0 ? Repeated(message, count) : std::string(message));
      it->second = Window{now, 0, {}};
    }
    // After this message's own kind, which just opened a window if its old
    // one had ended, so it is not written twice. Forgets the windows that
    // ended without a count, so memory follows the kinds seen recently.
    if (now >= next_sweep_) {
      SweepLocked(now, out);
      next_sweep_ = now + interval_;
    }
  }
  Write(out);
}

void LogRateLimiter::Flush() {
  std::vector<Line> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [kind, window] : windows_) {
      if (window.suppressed == 0) continue;
      out.emplace_back(kind.first, Repeated(window.latest, window.suppressed));
      window.suppressed = 0;
    }
  }
  if (sink_) Write(out);
}

LogSink RateLimitedLogSink(LogSink sink, std::shared_ptr<Clock> clock,
                           Duration interval) {
  if (!sink) return sink;
  auto limiter = std::make_shared<LogRateLimiter>(std::move(sink),
                                                  std::move(clock), interval);
  return [limiter](LogLevel level, std::string_view message) {
    limiter->Log(level, message);
  };
}

}  // namespace idem
