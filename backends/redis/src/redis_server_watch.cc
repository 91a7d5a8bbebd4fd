// See redis_server_watch.h.
//
// Why a thread of its own rather than checks inside the calls: a check is
// four commands per server, and a lazy store must connect while no call
// arrives (a fail-open route does not call a store it backs off from). The
// calls pay one atomic load (Ready) while serving.

#include "redis_server_watch.h"

#include <algorithm>
#include <utility>

namespace idem::redis {

using SteadyClock = std::chrono::steady_clock;

ServerWatch::ServerWatch(Router& router, Options options)
    : router_(router), o_(std::move(options)) {}

ServerWatch::~ServerWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status ServerWatch::Start() {
  if (!o_.lazy) {
    Result<ServerReport> first = Check();
    if (!first) return tl::unexpected(first.error());
    std::vector<Line> lines;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_check_ = SteadyClock::now();
      lines = Apply(first);
    }
    Log(lines);
  }
  thread_ = std::thread([this] { Run(); });
  return {};
}

Status ServerWatch::Ready(std::string_view op) const {
  const int state = state_.load(std::memory_order_acquire);
  if (state == kServing) return {};
  std::lock_guard<std::mutex> lock(mu_);
  const std::string head = o_.display + ": " + std::string(op) + ": ";
  if (state == kRefused) {
    return MakeError(ErrorCode::kUnavailable,
                     head + "the server is refused (" + why_ + ")");
  }
  return MakeError(ErrorCode::kUnavailable,
                   head + "not connected yet (connect=lazy, " +
                       std::to_string(attempts_) + " attempts failed)" +
                       (why_.empty() ? "" : ": " + why_));
}

void ServerWatch::Poke() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (poked_) return;
    poked_ = true;
  }
  wake_.notify_all();
}

Result<ServerReport> ServerWatch::Check() {
  IDEM_RETURN_IF_ERROR(router_.Connect());
  return CheckServers(router_, o_.allow_eviction, o_.display + ": ");
}

std::vector<ServerWatch::Line> ServerWatch::Apply(
    const Result<ServerReport>& result) {
  std::vector<Line> lines;
  const int state = state_.load(std::memory_order_relaxed);
  if (result) {
    for (const std::string& w : result->warnings) {
      if (std::find(warned_.begin(), warned_.end(), w) == warned_.end()) {
        lines.push_back({LogLevel::kWarning, w});
      }
    }
    warned_ = result->warnings;
    durable_.store(result->durable, std::memory_order_relaxed);
    if (state == kRefused) {
      lines.push_back({LogLevel::kWarning,
                       o_.display + ": the servers pass the checks again; "
                                    "serving calls"});
    } else if (state == kConnecting && attempts_ > 0) {
      lines.push_back({LogLevel::kInfo, o_.display + ": connected after " +
                                            std::to_string(attempts_ + 1) +
                                            " attempts"});
    }
    why_.clear();
    failing_ = false;
    attempts_ = 0;
    backoff_ = kFirstRetry;
    state_.store(kServing, std::memory_order_release);
    return lines;
  }
  const Error& e = result.error();
  if (e.code() == ErrorCode::kUnavailable) {
    // Once serving, calls meet the outage themselves; a refusal stands
    // until a check passes.
    if (state != kConnecting) return lines;
    // Waits kFirstRetry after the first failure, twice that after the
    // second, ... up to kMaxRetry.
    if (++attempts_ > 1) backoff_ = std::min(backoff_ * 2, kMaxRetry);
    why_ = e.message();
    if (!std::exchange(failing_, true)) {
      lines.push_back({LogLevel::kWarning,
                       e.message() +
                           "; every call is unavailable until a connection "
                           "succeeds (retrying in the background, at least "
                           "every " +
                           std::to_string(kMaxRetry.count()) + " ms)"});
    }
    return lines;
  }
  if (state != kRefused || why_ != e.message()) {
    lines.push_back({LogLevel::kError,
                     e.message() +
                         "; every call is unavailable until the server "
                         "passes this check (checked again every " +
                         std::to_string(o_.check_interval.count()) + " ms)"});
  }
  why_ = e.message();
  state_.store(kRefused, std::memory_order_release);
  return lines;
}

void ServerWatch::Log(const std::vector<Line>& lines) const {
  if (!o_.log) return;
  for (const Line& line : lines) o_.log(line.level, line.message);
}

void ServerWatch::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  // A lazy store's first attempt is at once.
  bool due = o_.lazy;
  // stop_ and poked_ change under mu_, which this thread holds whenever it
  // is not waiting or checking: no wake-up is lost.
  while (!stop_) {
    if (!due) {
      const auto deadline = [&] {
        if (state_.load(std::memory_order_relaxed) == kConnecting) {
          return last_check_ + backoff_;
        }
        return last_check_ + (poked_ ? std::min(o_.check_interval, kMinPokeGap)
                                     : o_.check_interval);
      };
      // Woken by Stop or Poke (which moves the deadline), or the time.
      wake_.wait_until(lock, deadline());
      if (stop_) return;
      if (SteadyClock::now() < deadline()) continue;
    }
    if (stop_) return;
    due = false;
    poked_ = false;
    lock.unlock();
    Result<ServerReport> result = Check();
    lock.lock();
    last_check_ = SteadyClock::now();
    std::vector<Line> lines = Apply(result);
    lock.unlock();
    Log(lines);
    lock.lock();
  }
}

}  // namespace idem::redis
