// The SQLite store's writer: one connection that makes every write of the
// store (Claim, Complete, Release, Revoke, PurgeExpired), one call or one
// transaction at a time. A call that finds the writer idle runs at once, in
// autocommit mode; one that finds it busy queues, and whoever finds it idle
// next runs every queued call (up to kMaxBatch) in one BEGIN IMMEDIATE ...
// COMMIT, each inside its own savepoint (group commit). A call returns (or
// is answered) only after the transaction holding it committed; a call that
// fails writes nothing and does not fail the others, while an error that
// ends the whole transaction, or a failed COMMIT, fails them all.
//
// Asynchronous calls (WriteAsync) join the same queue and the same batches,
// but their callers do not wait: the writer's own thread, started by the
// first WriteAsync, runs the queue whenever no synchronous caller does, and
// answers each call through its callback. A store used only synchronously
// has no thread of its own (so one opened before a fork() can be used in
// the child, as long as no asynchronous call was made before the fork).
//
// An application transaction may also hold the writer (Hold, for
// SqliteTransaction on the writer): it runs the calls queued before it
// first, then BEGIN IMMEDIATE on the connection, which its thread then has
// to itself until EndHold. Calls that come meanwhile queue as they do
// behind a batch, but wait at most busy_timeout (from the moment they were
// made) while the writer is held; a synchronous call from the holding
// thread itself fails at once instead of waiting for itself (an
// asynchronous one simply queues: its caller does not wait).
//
// Thread-safety: Write, WriteAsync and Hold may be called concurrently from
// any number of threads; queued calls run on the thread that finds the
// writer idle (a synchronous caller or the writer's thread), while their
// synchronous callers wait, so those callers' frames outlive the
// transaction. EndHold and held_connection() are the holder's. The
// destructor must not run concurrently with any other call, nor while the
// writer is held.

#ifndef IDEM_BACKENDS_SQLITE_SQLITE_WRITER_H_
#define IDEM_BACKENDS_SQLITE_SQLITE_WRITER_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "idem/error.h"
#include "idem/sqlite_store_options.h"
#include "idem/store/catch_exceptions.h"
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

  // Runs every asynchronous call still queued (in batches, as ever) and
  // answers it, then stops the writer's thread; a WriteAsync made meanwhile
  // (by a callback) is answered at once with kUnavailable "store closing".
  // Every callback has returned when the destructor does.
  ~Writer();

  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Opens the connection, with a page cache of options.cache_mb. The writer
  // also reopens it by itself after a failure left it unusable.
  Status Open();

  // Runs fn(Connection&) -> Result<T> on the writer's connection, in a
  // transaction shared with the calls queued beside it; returns once that
  // transaction committed (or failed). `op` names the call in errors:
  // kInvalidArgument when the calling thread holds the writer (Hold), and
  // kUnavailable when an application transaction held it for busy_timeout
  // since the call was made (the call is then taken off the queue, never
  // run).
  template <typename T, typename Fn>
  Result<T> Write(std::string_view op, Fn&& fn);

  // Write without waiting: queues fn (owned until it ran: capture copies)
  // and returns; done(Result<T>) is called exactly once with what Write
  // would have returned, after the transaction that ran fn committed or
  // failed, outside the writer's lock, on the thread that ran the batch
  // (the writer's thread, or a synchronous caller's). The caller waits only
  // for the writer's short lock, never for a write. The same bound as
  // Write's: queued while an application transaction holds the writer, the
  // call fails with kUnavailable once busy_timeout passed since it was
  // made, and never runs; made while the writer is being destroyed (by
  // another call's `done`), it is answered inside the call with
  // kUnavailable "store closing". A call made from the thread holding the
  // writer simply queues (its caller does not wait for itself). `done`
  // must not block, throw (std::terminate) or call the writer synchronously
  // (it may run inside a batch's leader). Throws (std::bad_alloc,
  // std::system_error when the writer's thread cannot start) only before
  // anything was queued: `done` is then not called.
  template <typename T, typename Fn>
  void WriteAsync(std::string_view op, Fn fn,
                  std::function<void(Result<T>)> done);

  // Holds the writer for an application transaction: waits until no other
  // thread writes or holds it (at most busy_timeout while another
  // transaction holds it), runs the calls queued by then in a transaction
  // of their own, then BEGIN IMMEDIATE on the connection (opened again if
  // a failure had closed it), which waits up to busy_timeout for other
  // connections' write locks. On success the calling thread holds the
  // writer until EndHold, and the connection is held_connection(). Errors:
  // kInvalidArgument when this thread already holds it; kUnavailable when
  // it was held too long, or BEGIN IMMEDIATE or the open failed (then
  // nothing is held).
  Status Hold();

  // The connection of a hold; only between a Hold that succeeded and its
  // EndHold.
  Connection& held_connection() { return *conn_; }

  // Whether the calling thread holds the writer, and `db` is its
  // connection.
  bool HeldByThisThreadOn(sqlite3* db) {
    std::lock_guard<std::mutex> lock(mu_);
    // conn_ is the holder's while held: read only when that is this thread.
    return HeldByThisThread() && conn_ != nullptr && conn_->db() == db;
  }

  // Calls waiting in the queue, synchronous and asynchronous (tests: to
  // know that a call waits).
  std::size_t queued() {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }

  // Ends the hold: COMMIT when `commit`, else ROLLBACK, and lets the queued
  // calls run. Errors: kInvalidArgument when the application left a
  // statement on the connection (not finalized here: the application still
  // has it): the transaction is rolled back and the connection dropped
  // (SQLite frees it once the statement is finalized; the next write opens
  // another); on commit, kInvalidArgument when no transaction is open any
  // more, or COMMIT's error (rolled back then).
  Status EndHold(bool commit);

 private:
  using Clock = std::chrono::steady_clock;

  class WriteOp {
   public:
    // `deadline`: for an asynchronous op, when it fails if the writer is
    // still held (Clock::time_point::max() for a synchronous one, whose
    // caller keeps its own).
    explicit WriteOp(Clock::time_point deadline = Clock::time_point::max())
        : deadline(deadline) {}
    virtual ~WriteOp() = default;
    virtual void Run(Connection& conn) = 0;
    virtual void Fail(const Error& e) = 0;
    virtual bool ok() const = 0;
    // Only when !ok().
    virtual const Error& error() const = 0;
    // Asynchronous ops: calls `done` with the result, then deletes the op.
    // Synchronous ops are never answered (their caller reads the result).
    virtual void Answer() noexcept {}
    // The call's name in errors (asynchronous ops only).
    virtual std::string_view name() const { return "write"; }
    bool async() const { return deadline != Clock::time_point::max(); }

    const Clock::time_point deadline;
    bool done = false;  // Synchronous ops only. Guarded by mu_.
  };

  template <typename T>
  class ResultOp : public WriteOp {
   public:
    using WriteOp::WriteOp;
    void Fail(const Error& e) override { result = tl::unexpected(e); }
    bool ok() const override { return result.has_value(); }
    const Error& error() const override { return result.error(); }

    Result<T> result =
        tl::unexpected(Error(ErrorCode::kInternal, "write not run"));
  };

  // Write's call, on its caller's frame.
  template <typename T, typename Fn>
  class TypedWriteOp final : public ResultOp<T> {
   public:
    TypedWriteOp(const std::string& path, Fn& fn) : path_(path), fn_(fn) {}
    void Run(Connection& conn) override {
      this->result = CatchExceptions([&] { return Prefix(path_) + "write"; },
                                     [&] { return fn_(conn); });
    }

   private:
    const std::string& path_;
    Fn& fn_;
  };

  // WriteAsync's call, on the heap from its queueing to its Answer.
  template <typename T, typename Fn>
  class AsyncWriteOp final : public ResultOp<T> {
   public:
    AsyncWriteOp(const std::string& path, std::string_view op, Fn fn,
                 std::function<void(Result<T>)> done,
                 Clock::time_point deadline)
        : ResultOp<T>(deadline),
          path_(path),
          op_(op),
          fn_(std::move(fn)),
          done_(std::move(done)) {}
    void Run(Connection& conn) override {
      this->result = CatchExceptions([&] { return Prefix(path_) + "write"; },
                                     [&] { return fn_(conn); });
    }
    void Answer() noexcept override {
      done_(std::move(this->result));
      delete this;
    }
    std::string_view name() const override { return op_; }

   private:
    const std::string& path_;
    const std::string op_;  // Short: kept without allocating.
    Fn fn_;
    std::function<void(Result<T>)> done_;
  };

  // With mu_ locked by `lock` and writing_ set by this thread: runs up to
  // kMaxBatch queued calls in one transaction (mu_ unlocked meanwhile),
  // marks the synchronous ones done and answers the asynchronous ones (mu_
  // unlocked then too; their synchronous callers are woken first).
  void RunQueued(std::unique_lock<std::mutex>& lock);
  // Runs the queued `batch` (whose ops are done when it returns).
  void RunBatch(const std::vector<WriteOp*>& batch);
  // With mu_ locked by `lock`: waits while another thread writes or holds
  // the writer, until done(); false when the writer was held by an
  // application transaction at `deadline`.
  template <typename Done>
  bool AwaitWriter(std::unique_lock<std::mutex>& lock,
                   std::chrono::steady_clock::time_point deadline, Done done);
  // With mu_ locked: whether the calling thread holds the writer.
  bool HeldByThisThread() const {
    return held_ && holder_ == std::this_thread::get_id();
  }
  // kInvalidArgument for a call `op` from the thread that holds the writer.
  Error HeldByCaller(std::string_view op) const;
  // kUnavailable for a call `op` that waited busy_timeout for a hold.
  Error HeldTooLong(std::string_view op) const;
  // kUnavailable for a call `op` made while the writer is destroyed.
  Error Closing(std::string_view op) const;
  // Runs one of the transaction statements; its error, or nullopt.
  std::optional<Error> Step(StatementId id, std::string_view op);
  // Drops the connection if a failure left it in a transaction.
  void RollBackOrClose();
  // Ends a hold (or a Hold that failed): the writer is idle again.
  void Release();
  class ReleaseOnExit {
   public:
    explicit ReleaseOnExit(Writer& writer) : writer_(&writer) {}
    ~ReleaseOnExit() {
      if (writer_ != nullptr) writer_->Release();
    }
    ReleaseOnExit(const ReleaseOnExit&) = delete;
    ReleaseOnExit& operator=(const ReleaseOnExit&) = delete;
    void Cancel() { writer_ = nullptr; }

   private:
    Writer* writer_;
  };

  // sqlite_writer_async.cc: the writer's thread and its helpers.
  // With mu_ locked: starts the writer's thread if it is not running, or
  // returns the answer of a WriteAsync `op` made while the writer is being
  // destroyed.
  std::optional<Error> StartServing(std::string_view op);
  // The writer's thread: runs the queue whenever nobody writes (leaving it
  // to a Hold that waits), fails the asynchronous calls a hold kept beyond
  // their deadline, and drains the queue before it stops.
  void Serve();
  // With mu_ locked by `lock` and the writer held: answers the first queued
  // asynchronous call past its deadline with HeldTooLong (mu_ unlocked
  // meanwhile) and returns true, or returns false and sets `next` to the
  // earliest deadline still queued (max() when none).
  bool ExpireOne(std::unique_lock<std::mutex>& lock, Clock::time_point& next);
  // With mu_ locked: tells the writer's thread that the writer may be idle,
  // or that the queue changed.
  void WakeServer() { serve_cv_.notify_one(); }

  const SqliteStoreOptions& options_;
  Checkpointer& checkpointer_;

  std::mutex mu_;
  std::condition_variable cv_;  // Synchronous callers and Hold wait on it.
  std::condition_variable serve_cv_;  // The writer's thread waits on it.
  std::vector<WriteOp*> queue_;       // Guarded by mu_.
  // Set while a thread writes a batch or holds the writer. Guarded by mu_.
  bool writing_ = false;
  // Set while an application transaction holds the writer (writing_ is set
  // too), by thread holder_. Guarded by mu_.
  bool held_ = false;
  std::thread::id holder_;
  // Hold calls waiting for the writer: the writer's thread leaves the idle
  // writer to them, so that a stream of asynchronous calls cannot keep a
  // transaction from beginning. Guarded by mu_.
  int hold_waiters_ = 0;
  // Set by the destructor: the writer's thread drains the queue and stops,
  // and WriteAsync answers at once. Guarded by mu_.
  bool stopping_ = false;
  std::thread server_;  // Started by the first WriteAsync, under mu_.
  // Used by the thread writing (the one that set writing_).
  std::vector<WriteOp*> batch_;
  std::unique_ptr<Connection> conn_;
};

template <typename Done>
bool Writer::AwaitWriter(std::unique_lock<std::mutex>& lock,
                         std::chrono::steady_clock::time_point deadline,
                         Done done) {
  while (!done() && writing_) {
    // A batch ends within SQLite's own busy_timeout per statement; a hold
    // ends when the application says so, hence the deadline.
    if (!held_) {
      cv_.wait(lock);
    } else if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
               !done() && held_) {
      return false;
    }
  }
  return true;
}

template <typename T, typename Fn>
Result<T> Writer::Write(std::string_view op, Fn&& fn) {
  TypedWriteOp<T, Fn> call(options_.path, fn);
  const auto deadline = Clock::now() + options_.busy_timeout;
  std::unique_lock<std::mutex> lock(mu_);
  if (HeldByThisThread()) return tl::unexpected(HeldByCaller(op));
  queue_.push_back(&call);
  if (!AwaitWriter(lock, deadline, [&] { return call.done; })) {
    // Held, so nobody takes calls off the queue: ours is still there.
    queue_.erase(std::find(queue_.begin(), queue_.end(), &call));
    return tl::unexpected(HeldTooLong(op));
  }
  if (call.done) return std::move(call.result);
  // Nobody is writing: this thread writes what is queued, in batches of
  // kMaxBatch from the front, until its own call ran (more than kMaxBatch
  // may have queued while the last writer ran).
  writing_ = true;
  RunQueued(lock);
  while (!call.done) {
    cv_.notify_all();  // The callers of the batch that ran.
    RunQueued(lock);
  }
  writing_ = false;
  // Asynchronous calls may still be queued.
  if (!queue_.empty()) WakeServer();
  lock.unlock();
  cv_.notify_all();
  return std::move(call.result);
}

template <typename T, typename Fn>
void Writer::WriteAsync(std::string_view op, Fn fn,
                        std::function<void(Result<T>)> done) {
  auto call = std::make_unique<AsyncWriteOp<T, Fn>>(
      options_.path, op, std::move(fn), std::move(done),
      Clock::now() + options_.busy_timeout);
  std::unique_lock<std::mutex> lock(mu_);
  if (std::optional<Error> closing = StartServing(op)) {
    lock.unlock();
    call->Fail(*closing);
    call.release()->Answer();
    return;
  }
  queue_.push_back(call.get());
  call.release();  // The writer's, until its Answer.
  // A writer busy with a batch runs the queue (or wakes the thread) when it
  // ends; a held one needs the thread for the new call's deadline.
  if (!writing_ || held_) WakeServer();
}

}  // namespace idem::sqlite_internal

#endif  // IDEM_BACKENDS_SQLITE_SQLITE_WRITER_H_
