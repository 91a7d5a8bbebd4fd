// Why one writer: SQLite lets one transaction write at a time anyway, and a
// second connection of this process that wants to write meets the first in
// SQLite's busy handler, which sleeps (1 ms and more); here it waits on a
// mutex instead, and the writer's page cache stays valid between its
// transactions (another connection's commit would empty it). Other
// processes are still kept out by SQLite's locks, and the writer waits for
// them up to busy_timeout.

#include "sqlite_writer.h"

#include <sqlite3.h>

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
