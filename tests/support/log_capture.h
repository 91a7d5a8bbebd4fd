// A LogSink that appends "level: message" lines to a vector, for tests that
// check what a Guard logs. Not synchronized: the test must not log from two
// threads at once into one vector.

#ifndef IDEM_TESTS_SUPPORT_LOG_CAPTURE_H_
#define IDEM_TESTS_SUPPORT_LOG_CAPTURE_H_

#include <string>
#include <string_view>
#include <vector>

#include "idem/log.h"

namespace idem::testing {

// `lines` must outlive the sink (and so the Guard that holds it).
inline LogSink CaptureLogs(std::vector<std::string>& lines) {
  return [&lines](LogLevel level, std::string_view message) {
    lines.emplace_back(std::string(LogLevelName(level)) + ": " +
                       std::string(message));
  };
}

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_LOG_CAPTURE_H_
