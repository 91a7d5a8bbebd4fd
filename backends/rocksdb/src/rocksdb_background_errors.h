// How the RocksDB store lives through RocksDB's background errors (a WAL
// write, flush or compaction that failed, typically on a full disk) and gets
// out of them by itself.
//
// RocksDB stops accepting writes after a hard error (a failed WAL write or
// flush) until DB::Resume() succeeds. Its own automatic recovery from a full
// disk waits, polling every 5 s, for free space of at least the write buffer
// size (64 MiB) and gets no further otherwise; this listener switches it off
// and the store resumes instead: before a write, when a background error is
// pending, at most one thread at a time calls DB::Resume(), at most once per
// kResumeInterval. Until one succeeds, writes are not issued at all and the
// store answers kUnavailable naming the error; reads (replays, Inspect) go
// on. A soft error (a failed compaction) does not stop writes; it is resumed
// the same way so that compactions start again.
//
// A fatal error (not a full disk: e.g. corruption found by a compaction)
// cannot be resumed; writes fail until the store is reopened.
//
// Thread-safety: every member may be called concurrently.

#ifndef IDEM_BACKENDS_ROCKSDB_BACKGROUND_ERRORS_H_
#define IDEM_BACKENDS_ROCKSDB_BACKGROUND_ERRORS_H_

#include <rocksdb/listener.h>
#include <rocksdb/status.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace idem::rocksdb_internal {

class BackgroundErrors final : public rocksdb::EventListener {
 public:
  // The least time between two DB::Resume() attempts.
  static constexpr std::chrono::milliseconds kResumeInterval{1000};

  // Called by RocksDB (any thread) for every background error it sets.
  void OnBackgroundError(rocksdb::BackgroundErrorReason reason,
                         rocksdb::Status* error) override;
  // Switches RocksDB's own recovery off: Check() resumes instead.
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason reason,
                            rocksdb::Status error,
                            bool* auto_recovery) override;

  // Before a write. nullopt when it may be issued: no background error is
  // pending, or only a soft one, or `resume` (DB::Resume()) just cleared it.
  // Otherwise why not (the pending error), and the write must not be issued.
  // Never blocks behind another thread's resume: that thread's caller waits
  // for it, the others get the error at once.
  std::optional<std::string> Check(
      const std::function<rocksdb::Status()>& resume);

 private:
  // Why writes are stopped, or nullopt. Requires mu_.
  std::optional<std::string> BlockedLocked() const;

  // Fast path: false while no error is pending.
  std::atomic<bool> pending_{false};

  std::mutex mu_;                 // Guards the four below.
  std::uint64_t generation_ = 0;  // Errors reported so far.
  bool stopped_ = false;  // A hard (or worse) error since the last resume.
  std::string last_error_;
  std::chrono::steady_clock::time_point next_resume_{};

  // Held by the one thread resuming.
  std::mutex resume_mu_;
};

}  // namespace idem::rocksdb_internal

#endif  // IDEM_BACKENDS_ROCKSDB_BACKGROUND_ERRORS_H_
