// The logging hook. idem prints nothing by itself: it hands warnings and
// errors to a callback the application installs. Messages never contain a
// client key, a scope or a body; they name records by a short id prefix.
//
// Thread-safety: the sink is called from whatever thread hit the event, so it
// must be safe for concurrent calls.

#ifndef IDEM_LOG_H_
#define IDEM_LOG_H_

#include <functional>
#include <string_view>

namespace idem {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

std::string_view LogLevelName(LogLevel level);

using LogSink = std::function<void(LogLevel level, std::string_view message)>;

}  // namespace idem

#endif  // IDEM_LOG_H_
