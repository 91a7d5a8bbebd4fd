// Completing a record in the application's own transaction
// (PostgresStore::CompleteInTransaction) and PostgresTransaction.
//
// The completion runs on the caller's connection, inside its transaction,
// the UPDATE ... WHERE id = $1 AND token = $2 AND state = 1 that Complete
// runs too. For a claim this store made it knows the record's fields
// (idem/store/claim_memo.h), as Complete does, and that UPDATE is all;
// otherwise one SELECT first returns the connection's database and the record
// (a LEFT JOIN, so that the database comes back even when the record is gone).
// The fencing token is checked by the UPDATE: a takeover committed before it
// makes it change nothing (kClaimLost); one in flight holds the row lock and
// the UPDATE waits for it, then re-checks its WHERE against the row that
// committed (READ COMMITTED) or fails with a serialization error (REPEATABLE
// READ, SERIALIZABLE). Once the UPDATE succeeded the row stays locked by the
// caller's transaction, so no takeover can slip in before its commit.
//
// The database is compared rather than trusted: a connection to another
// database with a table of the same name would otherwise report kClaimLost
// forever (its rows never hold the claim's token) instead of a plain error.

#include "idem/postgres_transaction.h"

#include <libpq-fe.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "idem/clock.h"
#include "idem/store/catch_exceptions.h"
#include "idem/store/record_codec.h"
#include "postgres_binary.h"
#include "postgres_row_calls.h"
#include "postgres_transaction_target.h"

namespace idem {
namespace {

using postgres_internal::BigEndian64;
using postgres_internal::Cell;
using postgres_internal::IntCell;
using postgres_internal::PgResult;
using postgres_internal::View;

// `name` as a quoted identifier, for names the server gave us (any
// characters): embedded quotes are doubled.
std::string QuoteAny(std::string_view name) {
  std::string quoted = "\"";
  for (char c : name) {
    quoted += c;
    if (c == '"') quoted += '"';
  }
  quoted += '"';
  return quoted;
}

class Caller {
 public:
  Caller(const PostgresStore::TransactionTarget& target, PGconn* conn)
      : target_(target), conn_(conn) {}

  Error Invalid(std::string_view op, std::string_view what) const {
    return Error(ErrorCode::kInvalidArgument,
                 target_.prefix + std::string(op) + ": " + std::string(what));
  }

  // Runs `sql` with binary parameters and results; the result when its
  // status is `want`.
  template <std::size_t N>
  Result<PgResult> Exec(const std::string& sql,
                        const std::array<std::string_view, N>& params,
                        ExecStatusType want, std::string_view op) const {
    std::array<const char*, N> values{};
    std::array<int, N> lengths{};
    std::array<int, N> formats{};
    for (std::size_t i = 0; i < N; ++i) {
      values[i] = params[i].data();
      lengths[i] = static_cast<int>(params[i].size());
      formats[i] = 1;
    }
    PgResult r(PQexecParams(conn_, sql.c_str(), static_cast<int>(N), nullptr,
                            values.data(), lengths.data(), formats.data(),
                            /*resultFormat=*/1));
    if (r && PQresultStatus(r.get()) == want) return r;
    const char* state =
        r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
    const char* message =
        r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_);
    std::string text = message != nullptr ? message : "";
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
      text.pop_back();
    }
    const std::string sqlstate = state != nullptr ? state : "";
    ErrorCode code = postgres_internal::CodeOfSqlState(sqlstate);
    if (PQstatus(conn_) == CONNECTION_BAD) code = ErrorCode::kUnavailable;
    return tl::unexpected(Error(
        code, target_.prefix + std::string(op) + ": " + text +
                  (sqlstate.empty() ? "" : " (SQLSTATE " + sqlstate + ")")));
  }

  Error WrongDatabase(std::string_view op, std::string_view database) const {
    return Invalid(op, "the connection is to database '" +
                           std::string(database) + "', not the store's '" +
                           target_.database +
                           "'; the record must be written in the business "
                           "rows' database");
  }

  Status Check(std::string_view op) const {
    if (conn_ == nullptr) return tl::unexpected(Invalid(op, "no connection"));
    if (PQstatus(conn_) != CONNECTION_BAD && PQisnonblocking(conn_) != 0) {
      return tl::unexpected(
          Invalid(op, "the connection is in non-blocking mode"));
    }
    return postgres_internal::CheckTransactionOpen(conn_, target_.prefix, op);
  }

  Result<TransactionCompletion> Complete(const RecordId& id, const Token& token,
                                         const Response& stored) const {
    constexpr std::string_view kOp = "complete in transaction";
    IDEM_RETURN_IF_ERROR(Check(kOp));
    // libpq's name of the database checked first: the SELECT below fails
    // when the other database has no such table.
    const char* connected = PQdb(conn_);
    if (connected == nullptr || target_.database != connected) {
      return tl::unexpected(WrongDatabase(kOp, connected ? connected : ""));
    }
    std::optional<Record> record;
    if (target_.recall) record = target_.recall(id, token);
    if (!record.has_value()) {
      IDEM_ASSIGN_OR_RETURN(record, Select(id, kOp));
      if (!record.has_value() || !record->HeldBy(token)) {
        return TransactionCompletion::kClaimLost;
      }
    }
    const std::string blob = EncodeCompleted(*record, stored);
    // current_database() again: without the SELECT, the UPDATE is the only
    // statement the server sees. locked_until is written with the record:
    // a renewal (ExtendLock) since the claim moved the column, and the
    // column must agree with the record written, as in Complete.
    const std::string update = "UPDATE " + target_.table +
                               " SET state = 2, record = $3, "
                               "locked_until = $5 "
                               "WHERE id = $1 AND token = $2 AND state = 1 "
                               "AND current_database() = $4";
    const auto locked_until = BigEndian64(ToUnixNanos(record->locked_until));
    IDEM_ASSIGN_OR_RETURN(const PgResult updated,
                          Exec(update,
                               std::array<std::string_view, 5>{
                                   id.view(), token.view(), blob,
                                   target_.database, View(locked_until)},
                               PGRES_COMMAND_OK, kOp));
    return std::string_view(PQcmdTuples(updated.get())) == "1"
               ? TransactionCompletion::kStored
               : TransactionCompletion::kClaimLost;
  }

  // The record of `id` read on the caller's connection, and its database
  // checked on the server too; nullopt when there is none.
  Result<std::optional<Record>> Select(const RecordId& id,
                                       std::string_view op) const {
    const std::string select =
        "SELECT current_database(), r.state, r.fingerprint, r.token, "
        "r.locked_until, r.expires_at, r.record FROM (SELECT 1) AS one "
        "LEFT JOIN " +
        target_.table + " AS r ON r.id = $1";
    IDEM_ASSIGN_OR_RETURN(
        const PgResult found,
        Exec(select, std::array<std::string_view, 1>{id.view()},
             PGRES_TUPLES_OK, op));
    const PGresult* row = found.get();
    if (PQntuples(row) != 1) {
      return MakeError(ErrorCode::kInternal,
                       target_.prefix + std::string(op) +
                           ": unexpected reply to the record's SELECT");
    }
    if (Cell(row, 0, 0) != target_.database) {
      return tl::unexpected(WrongDatabase(op, Cell(row, 0, 0)));
    }
    if (PQgetisnull(row, 0, 1)) return std::optional<Record>();
    IDEM_ASSIGN_OR_RETURN(Record record, postgres_internal::RecordOfRow(
                                             row, 0, 1, target_.prefix, id));
    return std::optional<Record>(std::move(record));
  }

  // BEGIN, COMMIT: only their status matters.
  Status Simple(const char* sql, std::string_view op) const {
    if (conn_ == nullptr) return tl::unexpected(Invalid(op, "no connection"));
    if (std::string_view(sql) == "BEGIN" &&
        PQtransactionStatus(conn_) != PQTRANS_IDLE) {
      return tl::unexpected(
          Invalid(op, "the connection is already inside a transaction"));
    }
    const PGTransactionStatusType before = PQtransactionStatus(conn_);
    IDEM_RETURN_IF_ERROR(
        Exec(sql, std::array<std::string_view, 0>{}, PGRES_COMMAND_OK, op));
    // COMMIT of a failed transaction "succeeds" as a ROLLBACK.
    if (before == PQTRANS_INERROR) {
      return MakeError(ErrorCode::kInternal,
                       target_.prefix + std::string(op) +
                           ": the transaction had failed and was rolled back");
    }
    return {};
  }

 private:
  const PostgresStore::TransactionTarget& target_;
  PGconn* const conn_;
};

}  // namespace

namespace postgres_internal {

Status CheckTransactionOpen(PGconn* conn, const std::string& prefix,
                            std::string_view op) {
  auto invalid = [&](std::string_view what) {
    return MakeError(ErrorCode::kInvalidArgument,
                     prefix + std::string(op) + ": " + std::string(what));
  };
  if (PQstatus(conn) == CONNECTION_BAD) {
    return MakeError(ErrorCode::kUnavailable,
                     prefix + std::string(op) + ": the connection is broken");
  }
  switch (PQtransactionStatus(conn)) {
    case PQTRANS_INTRANS:
      return {};
    case PQTRANS_INERROR:
      return invalid("the connection's transaction has failed (roll it back)");
    case PQTRANS_IDLE:
      return invalid(
          "the connection is not inside a transaction (BEGIN first)");
    default:
      return invalid("the connection is busy with another command");
  }
}

Result<PostgresStore::TransactionTarget> FindTransactionTarget(
    Connection& conn, const std::string& table) {
  IDEM_ASSIGN_OR_RETURN(
      const PgResult r,
      conn.RunText("SELECT current_database(), n.nspname FROM pg_class c "
                   "JOIN pg_namespace n ON n.oid = c.relnamespace "
                   "WHERE c.oid = to_regclass($1)",
                   {Quote(table)}, "open"));
  if (PQntuples(r.get()) != 1) {
    return MakeError(ErrorCode::kInternal,
                     "table " + Quote(table) + " not found after creating it");
  }
  PostgresStore::TransactionTarget target;
  target.database = PQgetvalue(r.get(), 0, 0);
  target.table = QuoteAny(PQgetvalue(r.get(), 0, 1)) + "." + Quote(table);
  return target;
}

}  // namespace postgres_internal

Result<TransactionCompletion> PostgresStore::CompleteInTransaction(
    PGconn* conn, const RecordId& id, const Token& token,
    const Response& stored) {
  // A connection this store lent to an open PostgresTransaction(store):
  // the store's prepared statements. Only the store's own connections are
  // in non-blocking mode, so the application's skip the lookup.
  if (conn != nullptr && PQisnonblocking(conn) != 0) {
    if (Lent* lent = FindLent(conn)) {
      return CompleteOnLent(*lent, id, token, stored);
    }
  }
  // A lazy store that has not connected does not know its table yet.
  IDEM_RETURN_IF_ERROR(Connected());
  const TransactionTarget& target = transaction_target();
  return CatchExceptions(
      [&] { return target.prefix + "complete in transaction"; },
      [&] { return Caller(target, conn).Complete(id, token, stored); });
}

PostgresTransaction::PostgresTransaction(PostgresStore& store)
    : store_(store), lends_(true) {}

PostgresTransaction::PostgresTransaction(PostgresStore& store, PGconn* conn)
    : store_(store), conn_(conn) {}

PostgresTransaction::~PostgresTransaction() {
  if (lends_) Rollback();
}

Status PostgresTransaction::Begin() {
  const PostgresStore::TransactionTarget& target = store_.transaction_target();
  if (!lends_) return Caller(target, conn_).Simple("BEGIN", "begin");
  if (lent_ != nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     target.prefix + "begin: this transaction is already open");
  }
  IDEM_ASSIGN_OR_RETURN(auto lent, store_.Lend());
  if (auto began = lent->lease->RunCommand("BEGIN", "begin"); !began) {
    store_.GiveBack(std::move(lent));  // Closed if the connection broke.
    return tl::unexpected(std::move(began).error());
  }
  conn_ = lent->lease->raw();
  lent_ = std::move(lent);
  return {};
}

Status PostgresTransaction::Commit() {
  if (!lends_) {
    return Caller(store_.transaction_target(), conn_)
        .Simple("COMMIT", "commit");
  }
  return EndLent(/*commit=*/true);
}

void PostgresTransaction::Rollback() {
  if (lends_) {
    (void)EndLent(/*commit=*/false);
    return;
  }
  if (conn_ == nullptr || PQtransactionStatus(conn_) == PQTRANS_IDLE) return;
  PQclear(PQexec(conn_, "ROLLBACK"));
}

Result<TransactionCompletion> PostgresTransaction::Complete(
    const ClaimHandle& claim, const Response& stored) {
  if (!lends_) {
    return store_.CompleteInTransaction(conn_, claim.record_id(), claim.token(),
                                        stored);
  }
  if (lent_ == nullptr) return NotOpen("complete in transaction");
  return store_.CompleteOnLent(*lent_, claim.record_id(), claim.token(),
                               stored);
}

tl::unexpected<Error> PostgresTransaction::NotOpen(std::string_view op) const {
  return MakeError(ErrorCode::kInvalidArgument,
                   store_.transaction_target().prefix + std::string(op) +
                       ": this transaction is not open (Begin first)");
}

// COMMIT or ROLLBACK on the lent connection, and the connection back to the
// pool; it is closed instead (which makes the server roll back whatever is
// open) when the application left it in a state the store cannot vouch
// for: broken, out of libpq's non-blocking mode or in pipeline mode (the
// store's deadlines need the one and its round trips exclude the other),
// with its transaction ended by the application, or with a command of the
// application's still in flight. A transaction that failed is rolled back
// and the connection kept: an error in the application's SQL costs no
// connection.
Status PostgresTransaction::EndLent(bool commit) {
  if (lent_ == nullptr) {
    if (commit) return NotOpen("commit");
    return {};
  }
  const std::string_view op = commit ? "commit" : "rollback";
  postgres_internal::Connection& c = *lent_->lease;
  PGconn* raw = c.raw();
  const std::string& prefix = store_.transaction_target().prefix;
  auto fail = [&](ErrorCode code, std::string_view what) -> Status {
    c.MarkBroken();
    return MakeError(code, prefix + std::string(op) + ": " + std::string(what));
  };
  Status ended;
  if (PQstatus(raw) != CONNECTION_OK) {
    ended = fail(ErrorCode::kUnavailable,
                 "the connection broke before the end of the transaction, "
                 "which the server rolled back");
  } else if (PQisnonblocking(raw) == 0 ||
             PQpipelineStatus(raw) != PQ_PIPELINE_OFF) {
    ended = fail(ErrorCode::kInvalidArgument,
                 "conn() was taken out of non-blocking mode or put in "
                 "pipeline mode; the connection is closed, which rolls the "
                 "transaction back");
  } else {
    switch (PQtransactionStatus(raw)) {
      case PQTRANS_INTRANS:
        if (auto r = c.RunCommand(commit ? "COMMIT" : "ROLLBACK", op); !r) {
          ended = tl::unexpected(std::move(r).error());
        }
        break;
      case PQTRANS_INERROR:
        if (auto r = c.RunCommand("ROLLBACK", op); !r) {
          ended = tl::unexpected(std::move(r).error());
        } else if (commit) {
          ended = MakeError(ErrorCode::kInternal,
                            prefix +
                                "commit: the transaction had failed and "
                                "was rolled back");
        }
        break;
      case PQTRANS_IDLE:
        ended = fail(ErrorCode::kInvalidArgument,
                     "the transaction was ended on conn() by the "
                     "application (a COMMIT or ROLLBACK of its own), so its "
                     "outcome is not known here; the connection is closed");
        break;
      default:
        ended = fail(ErrorCode::kInvalidArgument,
                     "a command sent on conn() is still in progress or its "
                     "results were not all read; the connection is closed, "
                     "which rolls the transaction back");
        break;
    }
  }
  conn_ = nullptr;
  store_.GiveBack(std::move(lent_));
  return ended;
}

}  // namespace idem
