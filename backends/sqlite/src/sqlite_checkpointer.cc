// Why a thread: the writer does not copy the WAL into the database file
// itself, as SQLite's automatic checkpoint would (that costs two fsyncs
// inside some unlucky call's commit, with every other write of this process
// waiting). The thread runs a PASSIVE checkpoint, which waits for nobody.
//
// Why the writer still checkpoints, and when (the header says what): the
// WAL restarts only after a checkpoint that copied all of it, and the
// thread never catches up with a writer that commits all the time. The
// writer's own checkpoint is a stall for every call queued behind it, as
// long as its copy and its two fsyncs (benchmarks/http/NOTES.md, "SQLite's
// checkpoints"). Made right after the thread's, it copies only what came
// in meanwhile, and its fsyncs find little left to write.

#include "sqlite_checkpointer.h"

#include <memory>
#include <mutex>
#include <utility>

namespace idem::sqlite_internal {

Result<std::unique_ptr<Checkpointer>> Checkpointer::Start(
    const SqliteStoreOptions& options) {
  IDEM_ASSIGN_OR_RETURN(auto conn, Connection::Open(options));
  std::unique_ptr<Checkpointer> checkpointer(new Checkpointer(std::move(conn)));
  Checkpointer* self = checkpointer.get();
  checkpointer->thread_ = std::thread([self] { self->Loop(); });
  return checkpointer;
}

Checkpointer::~Checkpointer() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
}

int Checkpointer::WalHook(void* checkpointer, sqlite3* db, const char*,
                          int frames) {
  static_cast<Checkpointer*>(checkpointer)->OnCommit(db, frames);
  return SQLITE_OK;
}

void Checkpointer::OnCommit(sqlite3* db, int frames) {
  int done = checkpointed_frames_.load(std::memory_order_relaxed);
  if (frames < done) {
    // The WAL started again from its beginning.
    done = 0;
    checkpointed_frames_.store(0, std::memory_order_relaxed);
  }
  const bool restart = frames >= kRestartFrames;
  if (restart && frames < kInlineCheckpointFrames &&
      frames - done <= kRestartRemainder &&
      !busy_.load(std::memory_order_acquire)) {
    // The thread just copied nearly all of it: copy the rest here, so that
    // the next transaction starts the WAL again. Busy (another process's
    // checkpoint): left for the next commit.
    int log = 0, copied = 0;
    if (sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log,
                                  &copied) == SQLITE_OK) {
      checkpointed_frames_.store(copied, std::memory_order_relaxed);
    }
  } else if (frames >= kInlineCheckpointFrames) {
    // The thread fell far behind: checkpoint here, so that the WAL stays
    // bounded. SQLITE_BUSY: a checkpoint holds the checkpoint lock — most
    // likely the thread's, descheduled on a loaded machine while every
    // commit grows the WAL past the bound. Wait for it, then copy what is
    // left (another process's checkpoint is not waited for).
    if (sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                  nullptr, nullptr) == SQLITE_BUSY) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        idle_.wait(lock, [this] { return !running_; });
      }
      sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                                nullptr);
    }
  } else if (frames - done >=
                 (restart ? kRestartRemainder : kCheckpointFrames) &&
             !busy_.load(std::memory_order_acquire)) {
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!running_ && !wanted_) {
        wake = wanted_ = true;
        busy_.store(true, std::memory_order_release);
      }
    }
    if (wake) cv_.notify_one();
  }
}

void Checkpointer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return wanted_ || stop_; });
    if (stop_) return;
    wanted_ = false;
    running_ = true;
    lock.unlock();
    // PASSIVE: never waits for readers or writers; whatever it cannot copy
    // now is left for the next round. Errors (another process's checkpoint
    // running, say) are left for the next round too.
    int log = 0, copied = 0;
    if (sqlite3_wal_checkpoint_v2(conn_->db(), nullptr,
                                  SQLITE_CHECKPOINT_PASSIVE, &log,
                                  &copied) == SQLITE_OK) {
      checkpointed_frames_.store(copied, std::memory_order_relaxed);
    }
    lock.lock();
    running_ = false;
    // After checkpointed_frames_: a writer that sees the thread idle sees
    // what it copied.
    busy_.store(false, std::memory_order_release);
    idle_.notify_all();
  }
}

}  // namespace idem::sqlite_internal
