// The SQLite store's checkpointer: a background thread, with a connection of
// its own, that copies the WAL into the database file when the writer's
// commits (OnCommit, from the writer connection's WAL hook) have added
// kCheckpointFrames frames since its last checkpoint.
//
// The WAL starts again from its beginning only after a checkpoint that
// copied all of it, which under a steady stream of commits only the
// writer's own connection can make (between two of its transactions). So
// once the WAL holds kRestartFrames, the writer checkpoints itself as soon
// as the thread's last checkpoint left little to copy (kRestartRemainder
// frames, waking the thread again until it does): the writer then waits
// only for that remainder and its fsyncs, not for a thousand frames'. Past
// kInlineCheckpointFrames, when the thread could not keep up, the writer
// checkpoints whatever is left, so that the WAL stays bounded (~20 MiB of
// 4 KiB pages).
//
// Thread-safety: OnCommit is called by the thread that writes (one at a
// time); the destructor stops the thread and must not run concurrently with
// OnCommit.

#ifndef IDEM_BACKENDS_SQLITE_SQLITE_CHECKPOINTER_H_
#define IDEM_BACKENDS_SQLITE_SQLITE_CHECKPOINTER_H_

#include <sqlite3.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "idem/error.h"
#include "idem/sqlite_store_options.h"
#include "sqlite_connection.h"

namespace idem::sqlite_internal {

class Checkpointer {
 public:
  // SQLite's own wal_autocheckpoint default.
  static constexpr int kCheckpointFrames = 1000;
  static constexpr int kRestartFrames = 3 * kCheckpointFrames;
  static constexpr int kRestartRemainder = kCheckpointFrames / 4;
  static constexpr int kInlineCheckpointFrames = 5 * kCheckpointFrames;

  // Opens the checkpointer's connection and starts its thread. Errors:
  // Connection::Open's.
  static Result<std::unique_ptr<Checkpointer>> Start(
      const SqliteStoreOptions& options);

  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // A commit on `db` left the WAL `frames` frames long.
  void OnCommit(sqlite3* db, int frames);

  // For sqlite3_wal_hook(db, &Checkpointer::WalHook, checkpointer).
  static int WalHook(void* checkpointer, sqlite3* db, const char* name,
                     int frames);

 private:
  explicit Checkpointer(std::unique_ptr<Connection> conn)
      : conn_(std::move(conn)) {}
  void Loop();

  std::unique_ptr<Connection> conn_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;    // Wakes the thread.
  std::condition_variable idle_;  // The thread finished a checkpoint.
  bool wanted_ = false;           // Guarded by mu_.
  bool stop_ = false;             // Guarded by mu_.
  bool running_ = false;          // Guarded by mu_.
  // running_, or a wake-up not taken yet, for OnCommit's test without mu_.
  std::atomic<bool> busy_{false};
  // The WAL frames the last checkpoint copied.
  std::atomic<int> checkpointed_frames_{0};
};

}  // namespace idem::sqlite_internal

#endif  // IDEM_BACKENDS_SQLITE_SQLITE_CHECKPOINTER_H_
