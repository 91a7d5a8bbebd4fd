#include "idem/log.h"

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
    if (digit && hex && word.size() == 64) {
      // A whole record id, logged so that an operator acts on that record
      // (a damaged one): every record keeps its own line.
      out += word;
    } else if (digit && hex) {
      out += '#';  // A number or a short id.
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

LogRateLimiter::~LogRateLimiter() { Flush(); }

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
    if (it->second.suppressed > 0) {
      out.emplace_back(it->first.first,
                       Repeated(it->second.latest, it->second.suppressed));
    }
    it = windows_.erase(it);
  }
}

void LogRateLimiter::Log(LogLevel level, std::string_view message) {
  if (!sink_) return;
  if (interval_ <= Duration::zero()) {
    sink_(level, message);
    return;
  }
  const TimePoint now = clock_->Now();
  std::vector<Line> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Kind kind(level, Shape(message));
    auto it = windows_.find(kind);
    if (it == windows_.end() && windows_.size() >= max_kinds_) {
      SweepLocked(now, out);
      if (windows_.size() >= max_kinds_) {
        kind.second = "(other messages)";
        it = windows_.find(kind);
      }
    }
    if (it == windows_.end()) {
      windows_.emplace(std::move(kind), Window{now, 0, {}});
      out.emplace_back(level, std::string(message));
    } else if (now - it->second.start < interval_) {
      ++it->second.suppressed;
      it->second.latest.assign(message);
    } else {
      const std::uint64_t count = it->second.suppressed;
      out.emplace_back(
          level, count > 0 ? Repeated(message, count) : std::string(message));
      it->second = Window{now, 0, {}};
    }
    // After this message's own kind, which just opened a window if its old
    // one had ended, so it is not written twice.
    if (now >= next_sweep_) {
      SweepLocked(now, out);
      next_sweep_ = now + interval_;
    }
  }
  for (const auto& [lvl, line] : out) sink_(lvl, line);
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
  for (const auto& [lvl, line] : out) {
    if (sink_) sink_(lvl, line);
  }
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
