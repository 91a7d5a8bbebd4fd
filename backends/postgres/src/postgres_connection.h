// One libpq connection of the PostgreSQL store: opening it with the store's
// timeouts, the statements it has prepared, and the round trip that runs a
// statement on it within a client-side deadline.
//
// Thread-safety: a Connection is used by one thread at a time (the pool
// hands it over under its mutex).

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_CONNECTION_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_CONNECTION_H_

#include <libpq-fe.h>

#include <array>
#include <chrono>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/error.h"
#include "idem/postgres_store_options.h"
#include "postgres_binary.h"
#include "postgres_sql.h"

namespace idem::postgres_internal {

using SteadyClock = std::chrono::steady_clock;

// The error code of a failed statement's SQLSTATE (postgres_store.h,
// "Errors"); "" (no server reply) is kUnavailable.
ErrorCode CodeOfSqlState(std::string_view state);

// What every connection of one store shares. Outlives its connections.
struct ConnectionSettings {
  PostgresStoreOptions options;
  // Begins every error message: "postgres store '<display>' table "<t>": ".
  std::string prefix;
  StatementTexts sql;
};

class Connection {
 public:
  // Connects with `settings` (libpq's connect_timeout; the server's
  // statement, lock and idle-in-transaction timeouts; TCP keepalives) in
  // non-blocking mode. Errors: kUnavailable (connection failed),
  // kResourceExhausted (out of memory).
  static Result<std::unique_ptr<Connection>> Open(
      const ConnectionSettings& settings);

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Set when the connection failed or timed out: it is closed on return.
  bool broken() const;

  // Whether the connection may go back to the pool: not broken, and idle
  // outside a transaction.
  bool Idle() const;

  // Whether the connection can be lent out again at `now`: Idle(), and not
  // closed by the server while it sat in the pool.
  bool Reusable(SteadyClock::time_point now) const;

  // Called when the connection goes back to the pool.
  void MarkReturned(SteadyClock::time_point now) { returned_at_ = now; }

  // Makes the pool close the connection instead of lending it again: its
  // session is in a state the store cannot vouch for (an application's
  // transaction left it so).
  void MarkBroken() { broken_ = true; }

  // The libpq connection, for an application's transaction on it
  // (PostgresTransaction(store)) and the checks around it.
  PGconn* raw() const { return conn_; }

  // Runs prepared statement `id` with binary parameters and results,
  // preparing it on this connection first if needed (a statement planned
  // each time, StatementSpec::plan_each_time, is sent with its text instead).
  // `op` names the call in errors. Errors: kUnavailable when the connection
  // fails or no reply comes within statement_timeout + kClientGrace (the
  // connection is then broken), otherwise by SQLSTATE (CodeOfSqlState). A
  // statement of the store's gone from the session or its name taken (SQLSTATE
  // 26000, 42P05: an application's DEALLOCATE or PREPARE on a lent connection)
  // also marks the connection broken, so that it fails one call, not every
  // call.
  Result<PgResult> Run(StatementId id,
                       std::initializer_list<std::string_view> params,
                       std::string_view op) {
    return Run(id, std::span<const std::string_view>(params), op);
  }
  Result<PgResult> Run(StatementId id, std::span<const std::string_view> params,
                       std::string_view op);

  // Prepares statement `id` on this connection, in a round trip of its own,
  // unless it is prepared already or planned each time; outside pipeline
  // mode (Run and SendPipelined call it). Errors as for Run.
  Status Prepare(StatementId id, std::string_view op);

  // One statement of a pipeline: Run's arguments.
  struct PipelinedStatement {
    StatementId id;
    std::span<const std::string_view> params;
    std::string_view op;
  };
  // Sends `statements` in libpq's pipeline mode (entered unless the
  // connection is in it already), each followed by a sync, so each is its
  // own transaction and one that fails aborts nothing after it, without
  // waiting for their results: CollectPipelined takes them, in the order
  // they were sent, and more may be sent meanwhile (the server runs them
  // one after another). A statement not yet prepared (and not planned each
  // time) is prepared first, in a round trip of its own, which needs the
  // pipeline empty. Errors: as Run's (kInternal for a statement to prepare
  // while results are due); the connection is then broken.
  Status SendPipelined(std::span<const PipelinedStatement> statements);
  // The results of the next `statements.size()` statements sent by
  // SendPipelined (`statements` as they were sent, for their names in
  // errors), each as Run would return it, by `deadline` (ReplyDeadline()
  // taken once what was sent before them is collected: the server starts
  // them only after it). When the connection fails or no reply comes in
  // time, every result is that error and the connection is broken.
  std::vector<Result<PgResult>> CollectPipelined(
      std::span<const PipelinedStatement> statements,
      SteadyClock::time_point deadline);

  // What WaitForReply saw first.
  enum class Woken { kReply, kWake, kDeadline };
  // Waits until a reply to what was sent can be read (kReply: the next
  // result, or an error the next read reports, the connection then
  // broken), `wake_fd` is readable (kWake; it is not read), or `deadline`
  // passes (kDeadline). For a thread that sends while results are due.
  Woken WaitForReply(int wake_fd, SteadyClock::time_point deadline);

  // When a reply must have come: statement_timeout + kClientGrace from now.
  SteadyClock::time_point ReplyDeadline() const;
  // Leaves pipeline mode once every result sent for is collected (nothing
  // when not in it): what Run and the pool need. Errors: kUnavailable; the
  // connection is then broken.
  Status EndPipeline();

  // A statement without parameters in the simple query protocol (BEGIN,
  // COMMIT, ROLLBACK: one message, nothing to prepare). Errors as for Run.
  Result<PgResult> RunCommand(const char* sql, std::string_view op);

  // An unprepared statement with text parameters and results (the schema's).
  // Errors as for Run.
  Result<PgResult> RunText(const std::string& sql,
                           const std::vector<std::string>& params,
                           std::string_view op);

 private:
  Connection(PGconn* conn, const ConnectionSettings& settings)
      : conn_(conn), settings_(settings) {}

  // Sends statement `id` (Run's first half), preparing it first if needed.
  Status Send(StatementId id, std::span<const std::string_view> params,
              std::string_view op);
  // Flushes what a PQsend* call queued and collects its result.
  Result<PgResult> Await(std::string_view op);
  // Await's steps: flush what was queued; the next PGresult (nullptr at
  // the end of a statement's); a statement's results, checked.
  Status FlushSent(std::string_view op, SteadyClock::time_point deadline);
  Result<PGresult*> NextResult(std::string_view op,
                               SteadyClock::time_point deadline);
  Result<PgResult> Collect(std::string_view op,
                           SteadyClock::time_point deadline);
  // Break the connection and say why.
  Error TimedOut(std::string_view op);
  Error Failed(std::string_view op);
  Error ConnectionError(std::string_view op) const;
  Error ResultError(std::string_view op, const PGresult* r) const;

  PGconn* const conn_;
  const ConnectionSettings& settings_;
  SteadyClock::time_point returned_at_{};  // Epoch: checked on first lease.
  std::array<bool, kStatementCount> prepared_{};
  bool broken_ = false;
};

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_CONNECTION_H_
