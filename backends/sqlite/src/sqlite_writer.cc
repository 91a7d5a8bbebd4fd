// Why one writer: SQLite lets one transaction write at a time anyway, and a
// second connection of this process that wants to write meets the first in
// SQLite's busy handler, which sleeps (1 ms and more); here it waits on a
// mutex instead, and the writer's page cache stays valid between its
// transactions (another connection's commit would empty it). Other
// processes are still kept out by SQLite's locks, and the writer waits for
// them up to busy_timeout.
//
// Why an application transaction may hold it (SqliteTransaction on the
// writer): on a connection of its own, that transaction meets the writer in
// SQLite's file lock, where the loser sleeps in the busy handler, and its
// commit empties the writer's page cache; holding the writer, it queues on
// the same mutex as every other write, completes the record with the
// writer's prepared statements, and the calls that queued behind it commit
// together when it ends. The holder runs what queued before it first, so
// that a stream of transactions cannot keep the store's own writes waiting
// until busy_timeout.

#include "sqlite_writer.h"

#include <sqlite3.h>

#include <chrono>
#include <mutex>
#include <string>

namespace idem::sqlite_internal {

Writer::Writer(const SqliteStoreOptions& options, Checkpointer& checkpointer)
    : options_(options), checkpointer_(checkpointer) {
  batch_.reserve(kMaxBatch);
}

Status Writer::Open() {
  IDEM_ASSIGN_OR_RETURN(conn_, Connection::Open(options_));
  if (options_.cache_mb > 0) {
    // Negative: a size in KiB rather than in pages. Pages the cache holds
    // are not read again with pread, but a bigger cache makes every write
    // transaction slower once the table is large: the time goes to SQLite
    // 3.40's page cache truncation at the end of each transaction, which
    // walks the cache's hash table.
    const std::string pragma =
        "PRAGMA cache_size = -" + std::to_string(options_.cache_mb * 1024);
    if (Status s = conn_->Exec(pragma.c_str(), "open"); !s) {
      conn_.reset();
      return s;
    }
  }
  // Replaces SQLite's automatic checkpoint, which would copy the WAL into
  // the database file and fsync both inside the commit of whichever call
  // crossed the threshold, while every other write of this process waits.
  sqlite3_wal_hook(conn_->db(), &Checkpointer::WalHook, &checkpointer_);
  return {};
}

void Writer::RunQueued(std::unique_lock<std::mutex>& lock) {
  // batch_ has room for kMaxBatch: nothing here allocates, so nothing throws
  // while writing_ is set.
  const std::size_t n = std::min(queue_.size(), kMaxBatch);
  batch_.assign(queue_.begin(), queue_.begin() + n);
  queue_.erase(queue_.begin(), queue_.begin() + n);
  lock.unlock();
  RunBatch(batch_);
  lock.lock();
  // The asynchronous calls move to the front of batch_: a synchronous one
  // marked done may be gone (its caller returned) once mu_ is unlocked.
  std::size_t answers = 0;
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    if (batch_[i]->async()) {
      batch_[answers++] = batch_[i];
    } else {
      batch_[i]->done = true;
    }
  }
  if (answers > 0) {
    // Outside mu_: a callback may queue the next call (a Complete after its
    // Claim). The synchronous callers need not wait for the callbacks.
    lock.unlock();
    cv_.notify_all();
    for (std::size_t i = 0; i < answers; ++i) batch_[i]->Answer();
    lock.lock();
  }
  batch_.clear();
}

Error Writer::HeldByCaller(std::string_view op) const {
  return Error(ErrorCode::kInvalidArgument,
               Prefix(options_.path) + std::string(op) +
                   ": this thread holds the store's writer in an open "
                   "SqliteTransaction, so the call would wait for itself; "
                   "make store calls before Begin or after Commit/Rollback");
}

Error Writer::Closing(std::string_view op) const {
  return Error(ErrorCode::kUnavailable,
               Prefix(options_.path) + std::string(op) +
                   ": store closing (the call was made while the store was "
                   "being destroyed)");
}

Error Writer::HeldTooLong(std::string_view op) const {
  return Error(ErrorCode::kUnavailable,
               Prefix(options_.path) + std::string(op) +
                   ": the store's writer was held by an application "
                   "transaction (SqliteTransaction) for more than "
                   "busy_timeout=" +
                   std::to_string(options_.busy_timeout.count()) +
                   " ms; keep those transactions short or raise "
                   "busy_timeout_ms");
}

Status Writer::Hold() {
  const auto deadline =
      std::chrono::steady_clock::now() + options_.busy_timeout;
  std::unique_lock<std::mutex> lock(mu_);
  if (HeldByThisThread()) return tl::unexpected(HeldByCaller("begin"));
  ++hold_waiters_;
  const bool idle = AwaitWriter(lock, deadline, [] { return false; });
  --hold_waiters_;
  if (!idle) {
    WakeServer();  // It may have left the writer to this call.
    return tl::unexpected(HeldTooLong("begin"));
  }
  writing_ = true;
  if (!queue_.empty()) RunQueued(lock);
  held_ = true;
  holder_ = std::this_thread::get_id();
  // Calls queued beyond the batch that ran now have deadlines to keep.
  if (!queue_.empty()) WakeServer();
  lock.unlock();
  cv_.notify_all();  // The callers of the calls that ran, if any.
  // Released on every way out but success, exceptions included.
  ReleaseOnExit release(*this);
  if (conn_ == nullptr) IDEM_RETURN_IF_ERROR(Open());
  if (std::optional<Error> e = Step(kBegin, "begin")) {
    RollBackOrClose();
    return tl::unexpected(std::move(*e));
  }
  release.Cancel();
  return {};
}

Status Writer::EndHold(bool commit) {
  ReleaseOnExit release(*this);
  if (conn_ == nullptr) return {};
  Status result;
  if (conn_->HasStatementsOfOthers()) {
    // The application still has them and will finalize them itself: SQLite
    // keeps this connection until it does, and the writer opens another for
    // the next write.
    conn_->RollBackIfInTransaction();
    conn_.reset();
    return MakeError(
        ErrorCode::kInvalidArgument,
        Prefix(options_.path) + (commit ? "commit" : "rollback") +
            ": a statement prepared on the transaction's connection "
            "(SqliteTransaction::db()) was not finalized; rolled back "
            "(finalize every statement before Commit or Rollback)");
  }
  if (commit) {
    if (sqlite3_get_autocommit(conn_->db()) != 0) {
      result = MakeError(ErrorCode::kInvalidArgument,
                         Prefix(options_.path) +
                             "commit: the transaction is no longer open (an "
                             "error rolled it back, or it was ended on "
                             "SqliteTransaction::db())");
    } else if (std::optional<Error> e = Step(kCommit, "commit")) {
      result = tl::unexpected(std::move(*e));
    }
  }
  // A rollback, or after a failed COMMIT (which may leave the transaction
  // open): nothing of it is kept.
  RollBackOrClose();
  return result;
}

void Writer::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    holder_ = std::thread::id();
    writing_ = false;
    WakeServer();
  }
  cv_.notify_all();
}

std::optional<Error> Writer::Step(StatementId id, std::string_view op) {
  auto stmt = conn_->Prepared(id, op);
  if (!stmt) return stmt.error();
  const int rc = sqlite3_step(*stmt);
  sqlite3_reset(*stmt);
  if (rc == SQLITE_DONE) return std::nullopt;
  return conn_->SqlError(op, rc);
}

void Writer::RollBackOrClose() {
  if (!conn_->RollBackIfInTransaction()) conn_.reset();  // Reopened later.
}

// One write transaction for a batch of two calls or more. A call that fails
// writes nothing (its savepoint is rolled back) and leaves the others be; an
// error that ends the whole transaction (SQLite rolls back on I/O errors and
// a full disk), or a failed COMMIT, fails every call of the batch.
void Writer::RunBatch(const std::vector<WriteOp*>& batch) {
  if (conn_ == nullptr) {
    if (Status s = Open(); !s) {
      for (WriteOp* w : batch) w->Fail(s.error());
      return;
    }
  }
  if (batch.size() == 1) {
    // Alone, a call runs in autocommit mode, as it would on a connection of
    // its own: each of its statements is a transaction, and a failed one
    // wrote nothing. Measured cheaper than BEGIN ... COMMIT around it
    // (~55-59 against 61-72 us of CPU per Claim+Complete, one thread).
    batch.front()->Run(*conn_);
    RollBackOrClose();
    return;
  }
  sqlite3* db = conn_->db();
  std::optional<Error> fatal = Step(kBegin, "begin");
  bool wrote = false;
  std::size_t ran = 0;
  for (WriteOp* w : batch) {
    if (fatal) break;
    if ((fatal = Step(kSavepoint, "savepoint"))) break;
    w->Run(*conn_);
    ++ran;
    if (sqlite3_get_autocommit(db) != 0) {
      fatal =
          w->ok()
              ? Error(ErrorCode::kInternal,
                      Prefix(options_.path) + "write transaction ended early")
              : Error(w->error().code(),
                      Prefix(options_.path) +
                          "write transaction rolled back by the "
                          "error of a call committed with this "
                          "one: " +
                          w->error().message());
      break;
    }
    if (w->ok()) {
      fatal = Step(kSavepointRelease, "savepoint");
      wrote = true;
    } else {
      fatal = Step(kSavepointRollback, "savepoint");
      if (!fatal) fatal = Step(kSavepointRelease, "savepoint");
    }
  }
  if (!fatal && wrote) fatal = Step(kCommit, "commit");
  if (fatal) {
    // Calls that failed on their own keep their error; nothing of the
    // others was written.
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (i >= ran || batch[i]->ok()) batch[i]->Fail(*fatal);
    }
  }
  // After an error, or when no call wrote anything: nothing to keep.
  RollBackOrClose();
}

}  // namespace idem::sqlite_internal
