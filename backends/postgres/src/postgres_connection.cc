// Connections and round trips of the PostgreSQL store.
//
// No call blocks beyond its timeouts. Every statement goes out in libpq's
// non-blocking mode and the caller polls the socket against a client-side
// deadline of statement_timeout + kClientGrace, so a dead or silent peer
// costs at most that deadline; the grace lets the server's own
// statement_timeout (a clean error) normally fire first. The server also
// enforces statement_timeout, lock_timeout and
// idle_in_transaction_session_timeout on the session. Connecting is bounded
// by libpq's connect_timeout (host name resolution excepted); TCP keepalives
// and tcp_user_timeout make a silently dropped peer visible.
//
// A connection that fails or times out is marked broken and closed: a
// half-read reply cannot be resynchronized, and the statement is not retried
// on another connection, since it may have committed.

#include "postgres_connection.h"

#include "idem/postgres_store.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>

namespace idem::postgres_internal {
namespace {

std::string Trimmed(const char* message) {
  std::string s = message != nullptr ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

void IgnoreNotice(void*, const PGresult*) {}

// Waits until the socket is ready for `events` or the deadline passes;
// false on timeout or a poll failure.
bool WaitSocket(PGconn* conn, short events, SteadyClock::time_point deadline) {
  pollfd p{.fd = PQsocket(conn), .events = events, .revents = 0};
  if (p.fd < 0) return false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - SteadyClock::now());
    if (left.count() <= 0) return false;
    const int n = ::poll(
        &p, 1,
        static_cast<int>(std::min<std::int64_t>(left.count() + 1, 60'000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// A connection idle for less than this is lent without checking its socket.
constexpr auto kCheckAfterIdle = std::chrono::milliseconds(20);

}  // namespace

// How an error's SQLSTATE tells the caller what to do (error.h): classes 08
// (connection), 53 (resources: too many connections, disk full), 57
// (statement timeout, shutdown), 40 (serialization, deadlock) and 55P03
// (lock not available) are worth retrying later; XX001 and XX002 are
// corrupt data.
ErrorCode CodeOfSqlState(std::string_view state) {
  if (state.size() != 5) return ErrorCode::kUnavailable;  // No server reply.
  const std::string_view cls = state.substr(0, 2);
  if (cls == "08" || cls == "53" || cls == "57" || cls == "40" ||
      state == "55P03") {
    return ErrorCode::kUnavailable;
  }
  if (state == "XX001" || state == "XX002") return ErrorCode::kDataLoss;
  return ErrorCode::kInternal;
}

Result<std::unique_ptr<Connection>> Connection::Open(
    const ConnectionSettings& settings) {
  static const std::string kApplicationName = "idem";
  static const std::string kOne = "1";
  static const std::string kThree = "3";
  const PostgresStoreOptions& o = settings.options;
  const std::string timeout_s = std::to_string(o.connect_timeout.count());
  const auto statement_ms = o.statement_timeout.count();
  const auto client_ms =
      (o.statement_timeout + PostgresStore::kClientGrace).count();
  const std::string server_options =
      "-c statement_timeout=" + std::to_string(statement_ms) +
      " -c lock_timeout=" + std::to_string(statement_ms) +
      " -c idle_in_transaction_session_timeout=" + std::to_string(client_ms);
  const std::string user_timeout = std::to_string(client_ms);
  const std::string keepalive_idle =
      std::to_string(std::max<std::int64_t>(1, client_ms / 1000));
  std::vector<const char*> keys;
  std::vector<const char*> values;
  // libpq copies the values; each must live until PQconnectdbParams
  // returns (hence no temporaries).
  auto add = [&](const char* key, const std::string& value) {
    if (value.empty()) return;
    keys.push_back(key);
    values.push_back(value.c_str());
  };
  add("host", o.host);
  add("port", o.port);
  add("dbname", o.dbname);
  add("user", o.user);
  add("password", o.password);
  add("sslmode", o.sslmode);
  add("connect_timeout", timeout_s);
  add("options", server_options);
  add("application_name", kApplicationName);
  add("keepalives", kOne);
  add("keepalives_idle", keepalive_idle);
  add("keepalives_interval", kOne);
  add("keepalives_count", kThree);
  add("tcp_user_timeout", user_timeout);
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* raw = PQconnectdbParams(keys.data(), values.data(), 0);
  if (raw == nullptr) {
    return MakeError(ErrorCode::kResourceExhausted,
                     settings.prefix + "connect: out of memory");
  }
  std::unique_ptr<Connection> conn(new Connection(raw, settings));
  if (PQstatus(raw) != CONNECTION_OK) {
    return tl::unexpected(conn->ConnectionError("connect"));
  }
  PQsetNoticeReceiver(raw, &IgnoreNotice, nullptr);
  if (PQsetnonblocking(raw, 1) != 0) {
    return tl::unexpected(conn->ConnectionError("connect"));
  }
  return conn;
}

Connection::~Connection() { PQfinish(conn_); }

bool Connection::broken() const {
  return broken_ || PQstatus(conn_) != CONNECTION_OK;
}

bool Connection::Idle() const {
  return !broken() && PQtransactionStatus(conn_) == PQTRANS_IDLE;
}

// A server that shuts down or restarts closes its sessions (after a FATAL
// message), which makes the idle socket readable; nothing else is sent to an
// idle session of ours. That takes a poll(), a system call a busy pool would
// pay on every lease: a connection that went back to the pool less than
// kCheckAfterIdle ago is lent without it. A
// server that died within that window costs at most the one call that finds
// out (kUnavailable, connection discarded), as a death mid-statement does; a
// restart takes far longer, so connections idle across one are checked.
bool Connection::Reusable(SteadyClock::time_point now) const {
  if (!Idle()) return false;
  if (now - returned_at_ < kCheckAfterIdle) return true;
  pollfd p{.fd = PQsocket(conn_), .events = POLLIN, .revents = 0};
  if (p.fd < 0) return false;
  int n;
  do {
    n = ::poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  return n == 0;
}

Error Connection::ConnectionError(std::string_view op) const {
  return Error(ErrorCode::kUnavailable,
               settings_.prefix + std::string(op) +
                   ": connection failed: " + Trimmed(PQerrorMessage(conn_)));
}

// Names the SQLSTATE, and the timeout when the statement timed out.
Error Connection::ResultError(std::string_view op, const PGresult* r) const {
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const std::string sqlstate = state != nullptr ? state : "";
  std::string message = settings_.prefix + std::string(op) + ": " +
                        Trimmed(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
  if (!sqlstate.empty()) message += " (SQLSTATE " + sqlstate + ")";
  if (sqlstate == "57014") {
    message += "; statement_timeout=" +
               std::to_string(settings_.options.statement_timeout.count()) +
               " ms";
  }
  return Error(CodeOfSqlState(sqlstate), std::move(message));
}

SteadyClock::time_point Connection::ReplyDeadline() const {
  return SteadyClock::now() + settings_.options.statement_timeout +
         PostgresStore::kClientGrace;
}

Error Connection::TimedOut(std::string_view op) {
  broken_ = true;
  return Error(ErrorCode::kUnavailable,
               settings_.prefix + std::string(op) +
                   ": no reply within statement_timeout=" +
                   std::to_string(settings_.options.statement_timeout.count()) +
                   " ms + " +
                   std::to_string(PostgresStore::kClientGrace.count()) +
                   " ms; connection closed");
}

Error Connection::Failed(std::string_view op) {
  broken_ = true;
  return ConnectionError(op);
}

Status Connection::FlushSent(std::string_view op,
                             SteadyClock::time_point deadline) {
  for (;;) {
    const int f = PQflush(conn_);
    if (f == 0) return {};
    if (f < 0) return tl::unexpected(Failed(op));
    if (!WaitSocket(conn_, POLLIN | POLLOUT, deadline)) {
      return tl::unexpected(TimedOut(op));
    }
    if (PQconsumeInput(conn_) == 0) return tl::unexpected(Failed(op));
  }
}

Result<PGresult*> Connection::NextResult(std::string_view op,
                                         SteadyClock::time_point deadline) {
  while (PQisBusy(conn_)) {
    if (!WaitSocket(conn_, POLLIN, deadline)) {
      return tl::unexpected(TimedOut(op));
    }
    if (PQconsumeInput(conn_) == 0) return tl::unexpected(Failed(op));
  }
  return PQgetResult(conn_);
}

Result<PgResult> Connection::Collect(std::string_view op,
                                     SteadyClock::time_point deadline) {
  PgResult first;
  for (;;) {
    IDEM_ASSIGN_OR_RETURN(PGresult * r, NextResult(op, deadline));
    if (r == nullptr) break;
    // One statement gives one result; keep an error over anything else.
    if (first == nullptr ||
        (PQresultStatus(r) == PGRES_FATAL_ERROR &&
         PQresultStatus(first.get()) != PGRES_FATAL_ERROR)) {
      first.reset(r);
    } else {
      PQclear(r);
    }
  }
  if (first == nullptr) return tl::unexpected(Failed(op));
  const ExecStatusType status = PQresultStatus(first.get());
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return first;
  if (PQstatus(conn_) != CONNECTION_OK) {
    broken_ = true;
    return MakeError(ErrorCode::kUnavailable,
                     ResultError(op, first.get()).message());
  }
  // Only an application's DEALLOCATE, DISCARD or PREPARE on a connection
  // lent to it makes the store's statements disagree with prepared_; the
  // session cannot be trusted, and a new one prepares afresh.
  const char* state = PQresultErrorField(first.get(), PG_DIAG_SQLSTATE);
  if (state != nullptr && (std::string_view(state) == "26000" ||
                           std::string_view(state) == "42P05")) {
    broken_ = true;
  }
  return tl::unexpected(ResultError(op, first.get()));
}

Result<PgResult> Connection::Await(std::string_view op) {
  const SteadyClock::time_point deadline = ReplyDeadline();
  IDEM_RETURN_IF_ERROR(FlushSent(op, deadline));
  return Collect(op, deadline);
}

Status Connection::Prepare(StatementId id, std::string_view op) {
  const StatementSpec& spec = Spec(id);
  if (prepared_[id] || spec.plan_each_time) return {};
  if (PQsendPrepare(conn_, spec.name, settings_.sql[id].c_str(),
                    static_cast<int>(spec.types.size()),
                    spec.types.data()) == 0) {
    return tl::unexpected(Failed(op));
  }
  IDEM_RETURN_IF_ERROR(Await(op));
  prepared_[id] = true;
  return {};
}

Status Connection::Send(StatementId id,
                        std::span<const std::string_view> params,
                        std::string_view op) {
  const StatementSpec& spec = Spec(id);
  if (params.size() != spec.types.size()) {
    return MakeError(ErrorCode::kInternal, settings_.prefix + std::string(op) +
                                               ": wrong parameter count");
  }
  IDEM_RETURN_IF_ERROR(Prepare(id, op));
  // On the stack: a claim should not pay three allocations for this.
  std::array<const char*, kMaxParams> values;
  std::array<int, kMaxParams> lengths;
  std::array<int, kMaxParams> formats;
  formats.fill(1);
  for (std::size_t i = 0; i < params.size(); ++i) {
    // A zero-length binary value still needs a non-null pointer.
    values[i] = params[i].data() != nullptr ? params[i].data() : "";
    lengths[i] = static_cast<int>(params[i].size());
  }
  const int sent =
      spec.plan_each_time
          ? PQsendQueryParams(conn_, settings_.sql[id].c_str(),
                              static_cast<int>(params.size()),
                              spec.types.data(), values.data(), lengths.data(),
                              formats.data(), /*resultFormat=*/1)
          : PQsendQueryPrepared(conn_, spec.name,
                                static_cast<int>(params.size()), values.data(),
                                lengths.data(), formats.data(),
                                /*resultFormat=*/1);
  if (sent == 0) return tl::unexpected(Failed(op));
  return {};
}

Result<PgResult> Connection::Run(StatementId id,
                                 std::span<const std::string_view> params,
                                 std::string_view op) {
  IDEM_RETURN_IF_ERROR(Send(id, params, op));
  return Await(op);
}

Status Connection::SendPipelined(
    std::span<const PipelinedStatement> statements) {
  if (statements.empty()) return {};
  const bool piping = PQpipelineStatus(conn_) != PQ_PIPELINE_OFF;
  // Prepared outside the pipeline, where a statement's own round trip may
  // go: in it, Send finds every statement prepared or planned each time.
  for (const PipelinedStatement& s : statements) {
    if (prepared_[s.id] || Spec(s.id).plan_each_time) continue;
    if (piping) {
      broken_ = true;  // The caller's pipeline cannot be finished.
      return MakeError(ErrorCode::kInternal,
                       settings_.prefix + std::string(s.op) +
                           ": statement to prepare while a pipeline runs");
    }
    IDEM_RETURN_IF_ERROR(Prepare(s.id, s.op));
  }
  const std::string_view op = statements.front().op;
  if (!piping && PQenterPipelineMode(conn_) == 0) {
    return tl::unexpected(Failed(op));
  }
  for (const PipelinedStatement& s : statements) {
    if (Status sent = Send(s.id, s.params, s.op); !sent) {
      broken_ = true;  // Mid-pipeline: the session's state is unknown.
      return sent;
    }
    if (PQpipelineSync(conn_) == 0) return tl::unexpected(Failed(s.op));
  }
  return FlushSent(op, ReplyDeadline());
}

std::vector<Result<PgResult>> Connection::CollectPipelined(
    std::span<const PipelinedStatement> statements,
    SteadyClock::time_point deadline) {
  std::vector<Result<PgResult>> results;
  results.reserve(statements.size());
  auto fail_all = [&](const Error& error) {
    results.clear();
    for (std::size_t i = 0; i < statements.size(); ++i) {
      results.push_back(tl::unexpected(error));
    }
    return std::move(results);
  };
  if (statements.empty()) return results;
  if (broken()) return fail_all(ConnectionError(statements.front().op));
  for (const PipelinedStatement& s : statements) {
    Result<PgResult> result = Collect(s.op, deadline);
    if (!result && broken_) return fail_all(result.error());
    // The statement's sync point.
    Result<PGresult*> sync = NextResult(s.op, deadline);
    if (!sync) return fail_all(sync.error());
    const bool synced =
        *sync != nullptr && PQresultStatus(*sync) == PGRES_PIPELINE_SYNC;
    PQclear(*sync);
    if (!synced) return fail_all(Failed(s.op));
    results.push_back(std::move(result));
  }
  return results;
}

Connection::Woken Connection::WaitForReply(int wake_fd,
                                           SteadyClock::time_point deadline) {
  std::array<pollfd, 2> p{
      pollfd{.fd = PQsocket(conn_), .events = POLLIN, .revents = 0},
      pollfd{.fd = wake_fd, .events = POLLIN, .revents = 0}};
  for (;;) {
    // Input libpq read already (while flushing) makes no socket readable.
    if (p[0].fd < 0 || PQconsumeInput(conn_) == 0 || !PQisBusy(conn_)) {
      return Woken::kReply;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - SteadyClock::now());
    if (left.count() <= 0) return Woken::kDeadline;
    const int n = ::poll(
        p.data(), p.size(),
        static_cast<int>(std::min<std::int64_t>(left.count() + 1, 60'000)));
    if (n < 0 && errno != EINTR) return Woken::kReply;  // The read fails.
    if (n > 0 && p[1].revents != 0) return Woken::kWake;
  }
}

Status Connection::EndPipeline() {
  if (PQpipelineStatus(conn_) == PQ_PIPELINE_OFF) return {};
  if (PQexitPipelineMode(conn_) == 0) {
    broken_ = true;
    return tl::unexpected(ConnectionError("pipeline"));
  }
  return {};
}

Result<PgResult> Connection::RunCommand(const char* sql, std::string_view op) {
  if (PQsendQuery(conn_, sql) == 0) {
    broken_ = true;
    return tl::unexpected(ConnectionError(op));
  }
  return Await(op);
}

Result<PgResult> Connection::RunText(const std::string& sql,
                                     const std::vector<std::string>& params,
                                     std::string_view op) {
  std::vector<const char*> values;
  std::vector<Oid> types(params.size(), kTextOid);
  for (const std::string& p : params) values.push_back(p.c_str());
  if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(params.size()),
                        types.data(), values.data(), nullptr, nullptr,
                        /*resultFormat=*/0) == 0) {
    broken_ = true;
    return tl::unexpected(ConnectionError(op));
  }
  return Await(op);
}

}  // namespace idem::postgres_internal
