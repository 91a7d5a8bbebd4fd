#include "rocksdb_info_log.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>
#include <system_error>

namespace idem::rocksdb_internal {

std::shared_ptr<InfoLog> InfoLog::Open(const std::string& dir,
                                       rocksdb::InfoLogLevel level) {
  const std::filesystem::path log = std::filesystem::path(dir) / "LOG";
  std::error_code ec;
  if (std::filesystem::exists(log, ec)) {
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    std::filesystem::rename(
        log, std::filesystem::path(dir) / ("LOG.old." + std::to_string(micros)),
        ec);
  }
  const int fd =
      ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  return std::shared_ptr<InfoLog>(new InfoLog(fd, level));
}

InfoLog::InfoLog(int fd, rocksdb::InfoLogLevel level)
    : rocksdb::Logger(level), fd_(fd) {}

InfoLog::~InfoLog() {
  if (!closed_) (void)InfoLog::CloseImpl();
}

rocksdb::Status InfoLog::CloseImpl() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  return rocksdb::Status::OK();
}

void InfoLog::Logv(const char* format, va_list ap) {
  if (fd_ < 0) return;
  timeval now{};
  ::gettimeofday(&now, nullptr);
  std::tm t{};
  ::localtime_r(&now.tv_sec, &t);
  char prefix[64];
  const int prefix_size = std::snprintf(
      prefix, sizeof prefix, "%04d/%02d/%02d-%02d:%02d:%02d.%06ld %ld ",
      t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
      static_cast<long>(now.tv_usec), static_cast<long>(::syscall(SYS_gettid)));
  std::string line(prefix, prefix_size > 0 ? prefix_size : 0);
  va_list copy;
  va_copy(copy, ap);
  const int size = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (size < 0) return;
  const std::size_t at = line.size();
  line.resize(at + static_cast<std::size_t>(size) + 1);
  std::vsnprintf(line.data() + at, static_cast<std::size_t>(size) + 1, format,
                 ap);
  line.back() = '\n';
  if (line.size() >= 2 && line[line.size() - 2] == '\n') line.pop_back();
  // One write per line; a failure (ENOSPC) loses the line and nothing else.
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace idem::rocksdb_internal
