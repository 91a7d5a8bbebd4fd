// RocksDB's informational LOG file, written so that a full disk cannot abort
// the process.
//
// RocksDB's own file logger writes through a WritableFileWriter, which
// remembers a failed write; the next write then checks an assertion that
// holds only after a failed SyncWithoutFlush, and Debian builds librocksdb
// with assertions on. On a full filesystem the first log line that cannot be
// written (RocksDB logs every background error it sets) leaves that writer
// failed, and the next line aborts the process (`Assertion
// 'sync_without_flush_called_' failed`), even with a single client. This
// logger writes each line with one write(2) on a plain O_APPEND descriptor
// and forgets failures: on a full disk log lines are lost, nothing else.
//
// Files: `<dir>/LOG`, the previous one renamed to `LOG.old.<microseconds>`
// on open, as RocksDB names them, so that RocksDB keeps the newest
// DBOptions::keep_log_file_num of them and deletes older ones. A line is
// `YYYY/MM/DD-HH:MM:SS.uuuuuu <thread id> <message>`, RocksDB's format.
//
// Thread-safety: Logv may be called concurrently (each line is one write).

#ifndef IDEM_BACKENDS_ROCKSDB_INFO_LOG_H_
#define IDEM_BACKENDS_ROCKSDB_INFO_LOG_H_

#include <rocksdb/env.h>

#include <cstdarg>
#include <memory>
#include <string>

namespace idem::rocksdb_internal {

class InfoLog final : public rocksdb::Logger {
 public:
  // Rotates and opens `<dir>/LOG` (dir must exist). When the file cannot be
  // opened the logger drops every line: the database works without a LOG.
  static std::shared_ptr<InfoLog> Open(const std::string& dir,
                                       rocksdb::InfoLogLevel level);
  ~InfoLog() override;

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override;

 private:
  InfoLog(int fd, rocksdb::InfoLogLevel level);
  rocksdb::Status CloseImpl() override;

  int fd_;
};

}  // namespace idem::rocksdb_internal

#endif  // IDEM_BACKENDS_ROCKSDB_INFO_LOG_H_
