// The SQLite store's writer: one connection that makes every write of the
// store (Claim, Complete, Release, Revoke, PurgeExpired), one call or one
// transaction at a time. A call that finds the writer idle runs at once, in
// autocommit mode; one that finds it busy queues, and whoever finds it idle
// next runs every queued call (up to kMaxBatch) in one BEGIN IMMEDIATE ...
// COMMIT, each inside its own savepoint (group commit). A call returns only
// after the transaction holding it committed; a call that fails writes
// nothing and does not fail the others, while an error that ends the whole
// transaction, or a failed COMMIT, fails them all.
//
// Thread-safety: Write may be called concurrently from any number of
// threads; queued calls run on the thread that finds the writer idle, while
// their callers wait, so the callers' frames outlive the transaction. The
// destructor must not run concurrently with Write.

#ifndef IDEM_BACKENDS_SQLITE_SQLITE_WRITER_H_
#define IDEM_BACKENDS_SQLITE_SQLITE_WRITER_H_

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/error.h"
#include "idem/sqlite_store.h"
#include "sqlite_checkpointer.h"
#include "sqlite_connection.h"
#include "sqlite_sql.h"

namespace idem::sqlite_internal {

class Writer {
 public:
  // Write calls that one transaction takes at most.
  static constexpr std::size_t kMaxBatch = 64;

  // `options` and `checkpointer` (told of every commit) must outlive the
  // writer.
  Writer(const SqliteStoreOptions& options, Checkpointer& checkpointer);

  // Opens the connection, with a page cache of options.cache_mb. The writer
  // also reopens it by itself after a failure left it unusable.
  Status Open();

  // Runs fn(Connection&) -> Result<T> on the writer's connection, in a
  // transaction shared with the calls queued beside it; returns once that
  // transaction committed (or failed).
  template <typename T, typename Fn>
  Result<T> Write(Fn&& fn);

 private:
  class WriteOp {
   public:
    virtual ~WriteOp() = default;
    virtual void Run(Connection& conn) = 0;
    virtual void Fail(const Error& e) = 0;
    virtual bool ok() const = 0;
    // Only when !ok().
    virtual const Error& error() const = 0;
    bool done = false;  // Guarded by mu_.
  };

  template <typename T, typename Fn>
  class TypedWriteOp final : public WriteOp {
   public:
    TypedWriteOp(const std::string& path, Fn& fn) : path_(path), fn_(fn) {}
    void Run(Connection& conn) override {
      result = Boundary(path_, "write", [&] { return fn_(conn); });
    }
    void Fail(const Error& e) override { result = tl::unexpected(e); }
    bool ok() const override { return result.has_value(); }
    const Error& error() const override { return result.error(); }

    Result<T> result =
        tl::unexpected(Error(ErrorCode::kInternal, "write not run"));

   private:
    const std::string& path_;
    Fn& fn_;
  };

  // Runs the queued `batch` (whose ops are done when it returns).
  void RunBatch(const std::vector<WriteOp*>& batch);
  // Runs one of the transaction statements; its error, or nullopt.
  std::optional<Error> Step(StatementId id, std::string_view op);
  // Drops the connection if a failure left it in a transaction.
  void RollBackOrClose();

  const SqliteStoreOptions& options_;
  Checkpointer& checkpointer_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WriteOp*> queue_;  // Guarded by mu_.
  bool writing_ = false;         // Guarded by mu_.
  // Used by the thread writing (the one that set writing_).
  std::vector<WriteOp*> batch_;
  std::unique_ptr<Connection> conn_;
};

template <typename T, typename Fn>
Result<T> Writer::Write(Fn&& fn) {
  TypedWriteOp<T, Fn> op(options_.path, fn);
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&op);
  while (!op.done && writing_) cv_.wait(lock);
  if (op.done) return std::move(op.result);
  // Nobody is writing: this thread writes what is queued, its own call among
  // them (the queue is at most kMaxBatch long when nobody writes: every
  // writer takes up to kMaxBatch, and whoever queued beyond waits and then
  // writes the rest).
  writing_ = true;
  // batch_ has room for kMaxBatch: nothing below allocates, so nothing
  // throws while writing_ is set.
  std::vector<WriteOp*>& batch = batch_;
  const std::size_t n = std::min(queue_.size(), kMaxBatch);
  batch.assign(queue_.begin(), queue_.begin() + n);
  queue_.erase(queue_.begin(), queue_.begin() + n);
  lock.unlock();
  RunBatch(batch);
  lock.lock();
  for (WriteOp* w : batch) w->done = true;
  batch.clear();
  writing_ = false;
  lock.unlock();
  cv_.notify_all();
  return std::move(op.result);
}

}  // namespace idem::sqlite_internal

#endif  // IDEM_BACKENDS_SQLITE_SQLITE_WRITER_H_
