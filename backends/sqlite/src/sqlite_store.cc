// The SQLite store; sqlite_store.h has its contract. The parts: the SQL text
// (sqlite_sql.h), a connection and its statement cache (sqlite_connection),
// the readers' pool (sqlite_pool), the schema and its migration
// (sqlite_schema), the one writer with its group commit (sqlite_writer),
// the background checkpointer (sqlite_checkpointer) and the SQL of one
// record (sqlite_record_ops: the statements below). This file makes the
// store operations of them.
//
// Claim is one statement:
//   INSERT ... ON CONFLICT (id) DO UPDATE SET ... WHERE <expired, or in
//   progress with the same fingerprint and its lock timed out>
//   RETURNING takeovers
// which inserts or takes over inside the writer's transaction; when it
// returns no row (a live record stood in the way), one SELECT in the same
// transaction reads the record that decides the outcome (kInProgress,
// kCompleted or kMismatch). The alternative, BEGIN IMMEDIATE; SELECT; decide
// in C++; INSERT OR REPLACE; COMMIT, was built too and measured a tie on the
// same workload, with 1 and with 8 threads, so the single statement stayed:
// it holds the write lock, which every process sharing the file waits for,
// for one statement instead of a four-step transaction.
//
// Complete is one conditional UPDATE ... WHERE id = ? AND token = ? AND
// state = 1 of the completed record. A token is fresh for every claim, so a
// row the UPDATE still finds in_progress with that token holds exactly the
// fields that claim wrote: for a claim this store made, it remembers them
// (idem/store/claim_memo.h) and writes the record without reading the row; for
// another (made by another store on the file, or forgotten), a SELECT in the
// same transaction reads them first. Release is one DELETE with the same
// condition. The completion inside an application transaction is the same
// UPDATE (sqlite_transaction.cc), on the writer's connection when the
// transaction holds the writer.

#include "idem/sqlite_store.h"
#include "sqlite_store_test_peer.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "idem/clock.h"
#include "idem/store/catch_exceptions.h"
#include "idem/store/claim_memo.h"
#include "idem/store/record_codec.h"
#include "sqlite_checkpointer.h"
#include "sqlite_connection.h"
#include "sqlite_pool.h"
#include "sqlite_record_ops.h"
#include "sqlite_schema.h"
#include "sqlite_sql.h"
#include "sqlite_stats.h"
#include "sqlite_writer.h"

namespace idem {

using sqlite_internal::BindBlob;
using sqlite_internal::Change;
using sqlite_internal::Checkpointer;
using sqlite_internal::CompleteOn;
using sqlite_internal::Connection;
using sqlite_internal::ConnectionPool;
using sqlite_internal::Prefix;
using sqlite_internal::SelectRecord;
using sqlite_internal::Writer;

namespace {

// Rows one PurgeExpired transaction deletes.
constexpr std::size_t kPurgeBatch = 1000;

}  // namespace

class SqliteStore::Impl {
 public:
  explicit Impl(const SqliteStoreOptions& options)
      : options_(options), pool_(options_) {}

  const std::string& path() const { return options_.path; }

  Status Start() {
    {
      IDEM_ASSIGN_OR_RETURN(auto lease, pool_.Acquire());
      IDEM_RETURN_IF_ERROR(sqlite_internal::PrepareSchema(*lease));
    }
    IDEM_ASSIGN_OR_RETURN(checkpointer_, Checkpointer::Start(options_));
    writer_ = std::make_unique<Writer>(options_, *checkpointer_);
    return writer_->Open();
  }

  void SetClaimHook(ClaimAttemptHook hook) { claim_hook_ = std::move(hook); }

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) {
    return writer_->Write<ClaimResult>("claim", [&](Connection& conn) {
      return sqlite_internal::ClaimOn(conn, claims_, claim_hook_,
                                      SqliteStore::kClaimAttempts, id, fp, now,
                                      ttl, lock_timeout);
    });
  }

  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) {
    return writer_->Write<bool>(
        "complete", [&](Connection& conn) -> Result<bool> {
          IDEM_ASSIGN_OR_RETURN(bool completed,
                                CompleteOn(conn, claims_, id, token, response));
          claims_.Forget(token);
          return completed;
        });
  }

  // Claim and Complete without waiting for the writer: the same writes,
  // on copies of the arguments, answered by the writer (sqlite_writer.h).
  void ClaimAsync(const RecordId& id, const Fingerprint& fp, TimePoint now,
                  Duration ttl, Duration lock_timeout,
                  StoreCallback<ClaimResult> done) {
    writer_->WriteAsync<ClaimResult>(
        "claim",
        [this, id, fp, now, ttl, lock_timeout](Connection& conn) {
          return sqlite_internal::ClaimOn(conn, claims_, claim_hook_,
                                          SqliteStore::kClaimAttempts, id, fp,
                                          now, ttl, lock_timeout);
        },
        std::move(done));
  }

  void CompleteAsync(const RecordId& id, const Token& token,
                     std::shared_ptr<const Response> response,
                     StoreCallback<bool> done) {
    writer_->WriteAsync<bool>(
        "complete",
        [this, id, token,
         response = std::move(response)](Connection& conn) -> Result<bool> {
          IDEM_ASSIGN_OR_RETURN(
              bool completed, CompleteOn(conn, claims_, id, token, *response));
          claims_.Forget(token);
          return completed;
        },
        std::move(done));
  }

  Result<bool> Release(const RecordId& id, const Token& token) {
    return writer_->Write<bool>(
        "release", [&](Connection& conn) -> Result<bool> {
          IDEM_ASSIGN_OR_RETURN(
              int changed, Change(conn, sqlite_internal::kRelease, "release",
                                  [&](sqlite3_stmt* stmt) {
                                    BindBlob(stmt, 1, id.view());
                                    BindBlob(stmt, 2, token.view());
                                  }));
          claims_.Forget(token);
          return changed == 1;
        });
  }

  Result<bool> Revoke(const RecordId& id) {
    // A remembered claim of this id stays in the memo until its slot is
    // reused: harmless, since its Complete's UPDATE finds no row.
    return writer_->Write<bool>(
        "revoke", [&](Connection& conn) -> Result<bool> {
          IDEM_ASSIGN_OR_RETURN(int changed,
                                Change(conn, sqlite_internal::kRevoke, "revoke",
                                       [&](sqlite3_stmt* stmt) {
                                         BindBlob(stmt, 1, id.view());
                                       }));
          return changed == 1;
        });
  }

  // The SELECT and the UPDATE run in the writer's transaction, so nothing
  // changes the row in between.
  Result<bool> ExtendLock(const RecordId& id, const Token& token, TimePoint now,
                          Duration lock_timeout) {
    return writer_->Write<bool>(
        "extend lock", [&](Connection& conn) -> Result<bool> {
          IDEM_ASSIGN_OR_RETURN(std::optional<Record> record,
                                SelectRecord(conn, id));
          if (!record.has_value()) return false;
          const std::optional<TimePoint> until =
              RenewedLockUntil(*record, token, now, lock_timeout);
          if (!until) return false;
          if (*until == record->locked_until) return true;
          record->locked_until = *until;
          const std::string blob = EncodeRecord(*record);
          IDEM_ASSIGN_OR_RETURN(int changed,
                                Change(conn, sqlite_internal::kExtendLock,
                                       "extend lock", [&](sqlite3_stmt* stmt) {
                                         BindBlob(stmt, 1, id.view());
                                         BindBlob(stmt, 2, token.view());
                                         sqlite3_bind_int64(
                                             stmt, 3, ToUnixNanos(*until));
                                         BindBlob(stmt, 4, blob);
                                       }));
          return changed == 1;
        });
  }

  Result<std::optional<StoreStats>> Stats(TimePoint now) {
    IDEM_ASSIGN_OR_RETURN(auto lease, pool_.Acquire());
    IDEM_ASSIGN_OR_RETURN(StoreStats stats,
                          sqlite_internal::CountRecords(*lease, now));
    return std::optional<StoreStats>(stats);
  }

  Result<std::optional<Record>> Inspect(const RecordId& id, TimePoint now) {
    IDEM_ASSIGN_OR_RETURN(auto lease, pool_.Acquire());
    IDEM_ASSIGN_OR_RETURN(std::optional<Record> record,
                          SelectRecord(*lease, id));
    if (record.has_value() && record->Expired(now)) record.reset();
    return record;
  }

  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) {
    std::size_t deleted = 0;
    while (deleted < limit) {
      const std::size_t batch = std::min(kPurgeBatch, limit - deleted);
      // One write call per batch, so that the other writers of this process
      // wait for one batch at most, as those of other processes do.
      IDEM_ASSIGN_OR_RETURN(
          const int n, writer_->Write<int>("purge", [&](Connection& conn) {
            return Change(conn, sqlite_internal::kPurge, "purge",
                          [&](sqlite3_stmt* stmt) {
                            sqlite3_bind_int64(stmt, 1, ToUnixNanos(now));
                            sqlite3_bind_int64(
                                stmt, 2, static_cast<sqlite3_int64>(batch));
                          });
          }));
      deleted += static_cast<std::size_t>(n);
      if (static_cast<std::size_t>(n) < batch) break;
    }
    return deleted;
  }

  // The claim of `token` on `id`, if this store made it and remembers it:
  // the in_progress record it wrote, but for a renewal's locked_until.
  std::optional<Record> RememberedClaim(const RecordId& id,
                                        const Token& token) {
    return claims_.RecallRecord(id, token);
  }

  // SqliteTransaction on the writer (SqliteStore::HoldWriter and after).
  Result<sqlite3*> HoldWriter() {
    IDEM_RETURN_IF_ERROR(writer_->Hold());
    return writer_->held_connection().db();
  }
  Result<TransactionCompletion> CompleteOnHeldWriter(const RecordId& id,
                                                     const Token& token,
                                                     const Response& stored) {
    Connection& conn = writer_->held_connection();
    if (sqlite3_get_autocommit(conn.db()) != 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       Prefix(path()) +
                           "complete in transaction: the transaction is no "
                           "longer open (an error rolled it back, or it was "
                           "ended on SqliteTransaction::db())");
    }
    // Not forgotten: if the transaction rolls back, the claim is still
    // held, and its Finish or Release needs no read either.
    IDEM_ASSIGN_OR_RETURN(bool stored_now,
                          CompleteOn(conn, claims_, id, token, stored));
    return stored_now ? TransactionCompletion::kStored
                      : TransactionCompletion::kClaimLost;
  }
  Status ReleaseWriter(bool commit) { return writer_->EndHold(commit); }
  bool HoldsWriterOn(sqlite3* db) { return writer_->HeldByThisThreadOn(db); }
  std::size_t QueuedWrites() { return writer_->queued(); }

 private:
  // Declared in this order so that they are destroyed writer first (its
  // thread runs the asynchronous calls still queued, which use claims_ and
  // claim_hook_), then the checkpointer (its thread stopped), then the
  // readers; options_ last.
  const SqliteStoreOptions options_;
  ConnectionPool pool_;
  ClaimMemo claims_;
  ClaimAttemptHook claim_hook_;  // Set before use, by tests only.
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<Writer> writer_;
};

// The boundary's context is Prefix(path) without its ": ".
SqliteStore::SqliteStore(std::unique_ptr<Impl> impl)
    : StoreBoundary("sqlite store '" + impl->path() + "'"),
      impl_(std::move(impl)) {}

SqliteStore::~SqliteStore() = default;

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(
    const SqliteStoreOptions& options, const StoreOptions& store_options) {
  const std::string& path = options.path;
  if (path.empty() || path == ":memory:") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "sqlite store: the database file path is empty or "
                     "':memory:' (a pooled store needs a file)");
  }
  if (options.busy_timeout < std::chrono::milliseconds::zero() ||
      options.busy_timeout > SqliteStoreOptions::kMaxBusyTimeout) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        Prefix(path) + "busy_timeout must be from 0 to " +
            std::to_string(SqliteStoreOptions::kMaxBusyTimeout.count()) +
            " ms, got " + std::to_string(options.busy_timeout.count()));
  }
  // kMaxCacheMb (1 TiB) is far above any machine's memory but well inside
  // what PRAGMA cache_size's KiB count holds.
  if (options.cache_mb > SqliteStoreOptions::kMaxCacheMb) {
    return MakeError(ErrorCode::kInvalidArgument,
                     Prefix(path) + "cache_mb out of range (at most " +
                         std::to_string(SqliteStoreOptions::kMaxCacheMb) + ")");
  }
  if (sqlite3_threadsafe() == 0) {
    return MakeError(ErrorCode::kInternal,
                     Prefix(path) + "SQLite was built without thread support");
  }
  // Before the store exists, so outside its StoreBoundary.
  return CatchExceptions(
      [&] { return Prefix(path) + "open"; },
      [&]() -> Result<std::unique_ptr<SqliteStore>> {
        std::error_code ec;
        if (std::filesystem::is_directory(path, ec)) {
          return MakeError(
              ErrorCode::kInvalidArgument,
              Prefix(path) + "is a directory, not a database file");
        }
        if (!options.create && !std::filesystem::exists(path, ec)) {
          return MakeError(ErrorCode::kUnavailable,
                           Prefix(path) + "does not exist (create=false)");
        }
        const std::filesystem::path parent =
            std::filesystem::path(path).parent_path();
        if (!parent.empty() && options.create) {
          std::filesystem::create_directories(parent, ec);
          if (ec) {
            return MakeError(
                ErrorCode::kUnavailable,
                Prefix(path) + "cannot create its directory: " + ec.message());
          }
        }
        (void)store_options;  // No background work of its own reads a clock.
        auto impl = std::make_unique<Impl>(options);
        IDEM_RETURN_IF_ERROR(impl->Start());
        return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(impl)));
      });
}

Result<ClaimResult> SqliteStore::DoClaim(const RecordId& id,
                                         const Fingerprint& fp, TimePoint now,
                                         Duration ttl, Duration lock_timeout) {
  return impl_->Claim(id, fp, now, ttl, lock_timeout);
}

Result<bool> SqliteStore::DoComplete(const RecordId& id, const Token& token,
                                     const Response& response) {
  return impl_->Complete(id, token, response);
}

void SqliteStore::DoClaimAsync(const RecordId& id, const Fingerprint& fp,
                               TimePoint now, Duration ttl,
                               Duration lock_timeout,
                               StoreCallback<ClaimResult> done) {
  impl_->ClaimAsync(id, fp, now, ttl, lock_timeout, std::move(done));
}

void SqliteStore::DoCompleteAsync(const RecordId& id, const Token& token,
                                  std::shared_ptr<const Response> response,
                                  StoreCallback<bool> done) {
  impl_->CompleteAsync(id, token, std::move(response), std::move(done));
}

Result<bool> SqliteStore::DoRelease(const RecordId& id, const Token& token) {
  return impl_->Release(id, token);
}

Result<bool> SqliteStore::DoRevoke(const RecordId& id) {
  return impl_->Revoke(id);
}

Result<bool> SqliteStore::DoExtendLock(const RecordId& id, const Token& token,
                                       TimePoint now, Duration lock_timeout) {
  return impl_->ExtendLock(id, token, now, lock_timeout);
}

Result<std::optional<StoreStats>> SqliteStore::DoStats(TimePoint now) {
  return impl_->Stats(now);
}

void SqliteStoreTestPeer::SetClaimAttemptHook(SqliteStore& store,
                                              ClaimAttemptHook hook) {
  store.impl_->SetClaimHook(std::move(hook));
}

Result<std::optional<Record>> SqliteStore::DoInspect(const RecordId& id,
                                                     TimePoint now) {
  return impl_->Inspect(id, now);
}

Result<std::size_t> SqliteStore::DoPurgeExpired(TimePoint now,
                                                std::size_t limit) {
  return impl_->PurgeExpired(now, limit);
}

StoreInfo SqliteStore::Info() const {
  return StoreInfo{.name = "sqlite",
                   .durable = true,
                   .shared_across_processes = true,
                   .async_calls = true};
}

const std::string& SqliteStore::path() const { return impl_->path(); }

Result<sqlite3*> SqliteStore::HoldWriter() {
  return Call("begin", [&] { return impl_->HoldWriter(); });
}

Result<TransactionCompletion> SqliteStore::CompleteOnHeldWriter(
    const RecordId& id, const Token& token, const Response& stored) {
  return impl_->CompleteOnHeldWriter(id, token, stored);
}

bool SqliteStore::HoldsWriterOn(sqlite3* db) {
  return db != nullptr && impl_->HoldsWriterOn(db);
}

std::size_t SqliteStoreTestPeer::QueuedWrites(SqliteStore& store) {
  return store.impl_->QueuedWrites();
}

Status SqliteStore::ReleaseWriter(bool commit) {
  return Call(commit ? "commit" : "rollback",
              [&] { return impl_->ReleaseWriter(commit); });
}

std::optional<Record> SqliteStore::RememberedClaim(const RecordId& id,
                                                   const Token& token) {
  return impl_->RememberedClaim(id, token);
}

}  // namespace idem
