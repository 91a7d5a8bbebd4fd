// The PostgreSQL store; see postgres_store.h for its contract, schema and
// timeouts.
//
// Every call leases one pooled connection (a PGconn is used by one thread
// at a time; the lease hands it over under the pool mutex, which is also
// what lets ThreadSanitizer see the handover, since libpq itself is not
// instrumented). Statements go out in libpq's non-blocking mode and the
// caller polls the socket against a deadline, so a dead peer costs at most
// the deadline. Parameters and results are in the binary format: record
// blobs go over the wire as they are, without hex escaping.

#include "idem/postgres_store.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/catch_exceptions.h"
#include "idem/record_codec.h"
#include "idem/token.h"

namespace idem {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Type OIDs of the parameters (pg_type.h; stable across versions).
constexpr Oid kBoolOid = 16;
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;

// Any fixed key: every idem schema change in a database takes this lock
// for its transaction, whatever the table.
constexpr std::int64_t kSchemaLockKey = 0x6964656d5f736368;  // "idem_sch"

constexpr std::size_t kMaxTableName = 48;

enum StatementId {
  kInsert,
  kClaim,
  kSelect,
  kComplete,
  kRelease,
  kRevoke,
  kPurge,
  kStatementCount,
};

struct StatementSpec {
  const char* name;
  std::vector<Oid> types;
};

// The most parameters a statement has (the claim's).
constexpr std::size_t kMaxParams = 7;

const StatementSpec& Spec(StatementId id) {
  static const StatementSpec kSpecs[kStatementCount] = {
      {"idem_insert",
       {kByteaOid, kByteaOid, kByteaOid, kInt8Oid, kInt8Oid, kByteaOid}},
      {"idem_claim",
       {kByteaOid, kByteaOid, kByteaOid, kInt8Oid, kInt8Oid, kByteaOid,
        kInt8Oid}},
      {"idem_select", {kByteaOid}},
      {"idem_complete", {kByteaOid, kByteaOid, kByteaOid}},
      {"idem_release", {kByteaOid, kByteaOid}},
      {"idem_revoke", {kByteaOid}},
      {"idem_purge", {kInt8Oid, kInt8Oid}},
  };
  return kSpecs[id];
}

// The statements for one table; `t` is the quoted table name. See the
// header for why the claim has the shape it has. In DO UPDATE, `r.` is the
// existing row and `excluded.` the one the INSERT proposed.
std::array<std::string, kStatementCount> BuildSql(const std::string& t) {
  std::array<std::string, kStatementCount> sql;
  // $1 id, $2 fingerprint, $3 token, $4 locked_until, $5 expires_at,
  // $6 record. "INSERT 0 1" when the id was free.
  sql[kInsert] = "INSERT INTO " + t +
                 " (id, state, fingerprint, token, locked_until, expires_at, "
                 "takeover, record) VALUES ($1, 1, $2, $3, $4, $5, false, $6) "
                 "ON CONFLICT (id) DO NOTHING";
  // The same and $7 now. One row (takeover) when the claim is acquired,
  // none when the record stood in the way after all.
  sql[kClaim] =
      "INSERT INTO " + t +
      " AS r (id, state, fingerprint, token, locked_until, expires_at, "
      "takeover, record) VALUES ($1, 1, $2, $3, $4, $5, false, $6) "
      "ON CONFLICT (id) DO UPDATE SET state = 1, "
      "fingerprint = excluded.fingerprint, token = excluded.token, "
      "locked_until = excluded.locked_until, "
      "expires_at = excluded.expires_at, takeover = r.expires_at > $7, "
      "record = excluded.record "
      "WHERE r.expires_at <= $7 OR (r.state = 1 AND "
      "r.fingerprint = excluded.fingerprint AND r.locked_until <= $7) "
      "RETURNING r.takeover";
  // $1 id.
  sql[kSelect] =
      "SELECT state, fingerprint, token, locked_until, expires_at, record "
      "FROM " +
      t + " WHERE id = $1";
  // $1 id, $2 token, $3 record.
  sql[kComplete] = "UPDATE " + t +
                   " SET state = 2, record = $3 "
                   "WHERE id = $1 AND token = $2 AND state = 1";
  // $1 id, $2 token.
  sql[kRelease] =
      "DELETE FROM " + t + " WHERE id = $1 AND token = $2 AND state = 1";
  // $1 id.
  sql[kRevoke] = "DELETE FROM " + t + " WHERE id = $1";
  // $1 now, $2 limit.
  sql[kPurge] = "DELETE FROM " + t + " WHERE id IN (SELECT id FROM " + t +
                " WHERE expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)";
  return sql;
}

// Schema steps: kSchemaSteps[v] takes a table from version v to v + 1.
// `%t` is the quoted table name, `%i` the quoted index name.
const std::vector<std::vector<std::string>>& SchemaSteps() {
  static const std::vector<std::vector<std::string>> kSteps = {
      // 0 -> 1: the table of postgres_store.h.
      {
          "CREATE TABLE %t ("
          "id bytea PRIMARY KEY, "
          "state smallint NOT NULL, "
          "fingerprint bytea NOT NULL, "
          "token bytea NOT NULL, "
          "locked_until bigint NOT NULL, "
          "expires_at bigint NOT NULL, "
          "takeover boolean NOT NULL, "
          "record bytea NOT NULL)",
          "CREATE INDEX %i ON %t (expires_at)",
      },
  };
  return kSteps;
}

std::string Substitute(std::string sql, const std::string& table,
                       const std::string& index) {
  for (auto [key, value] :
       {std::pair<std::string_view, const std::string*>{"%t", &table},
        {"%i", &index}}) {
    for (std::size_t at = sql.find(key); at != std::string::npos;
         at = sql.find(key, at + value->size())) {
      sql.replace(at, key.size(), *value);
    }
  }
  return sql;
}

std::int64_t Ns(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

// Binary-format integers are big-endian.
std::array<char, 8> BigEndian64(std::int64_t v) {
  std::array<char, 8> out;
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(u >> (56 - 8 * i));
  return out;
}

std::int64_t ReadBigEndian(const char* p, int size) {
  std::uint64_t u = 0;
  for (int i = 0; i < size; ++i) {
    u = (u << 8) | static_cast<unsigned char>(p[i]);
  }
  if (size < 8 && size > 0 && (u >> (8 * size - 1)) != 0) {
    u |= ~std::uint64_t{0} << (8 * size);  // Sign-extend.
  }
  return static_cast<std::int64_t>(u);
}

bool ValidTableName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTableName) return false;
  auto letter = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (!letter(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) {
    return letter(c) || (c >= '0' && c <= '9');
  });
}

std::string Quote(std::string_view identifier) {
  // ValidTableName admits no quote characters, so no escaping is needed.
  // (Appended piecewise: GCC 12 at -O3 warns falsely (-Wrestrict) about
  // "\"" + std::string.)
  std::string quoted;
  quoted.reserve(identifier.size() + 2);
  quoted += '"';
  quoted += identifier;
  quoted += '"';
  return quoted;
}

// How an error's SQLSTATE tells the caller what to do (error.h).
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

std::string Trimmed(const char* message) {
  std::string s = message != nullptr ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

// A cell of a binary-format result.
std::string_view Cell(const PGresult* r, int row, int column) {
  return {PQgetvalue(r, row, column),
          static_cast<std::size_t>(PQgetlength(r, row, column))};
}

std::int64_t IntCell(const PGresult* r, int row, int column) {
  return ReadBigEndian(PQgetvalue(r, row, column), PQgetlength(r, row, column));
}

void IgnoreNotice(void*, const PGresult*) {}

// One pooled connection and which statements it has prepared. Used by one
// thread at a time.
class Connection {
 public:
  explicit Connection(PGconn* conn) : conn_(conn) {}
  ~Connection() { PQfinish(conn_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  PGconn* get() const { return conn_; }
  bool prepared(StatementId id) const { return prepared_[id]; }
  void set_prepared(StatementId id) { prepared_[id] = true; }

  // Set when the connection failed or timed out: it is closed on return.
  bool broken() const { return broken_ || PQstatus(conn_) != CONNECTION_OK; }
  void set_broken() { broken_ = true; }

  // Whether the connection may go back to the pool: not broken, and idle
  // outside a transaction.
  bool Idle() const {
    return !broken() && PQtransactionStatus(conn_) == PQTRANS_IDLE;
  }

  // Whether the connection can be lent out again at `now`: Idle(), and not
  // closed by the server while it sat in the pool. A server that shuts down
  // or restarts closes its sessions (after a FATAL message), which makes the
  // idle socket readable; nothing else is sent to an idle session of ours.
  // That takes a poll(), which a busy pool would pay on every lease (it was
  // a third of the system calls of a claim): a connection that went back to
  // the pool less than kCheckAfterIdle ago is lent without it. A server
  // that died within that window costs at most the one call that finds out
  // (kUnavailable, connection discarded), as a death mid-statement does;
  // a restart takes far longer, so connections idle across one are checked.
  bool Reusable(SteadyClock::time_point now) const {
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

  // Called when the connection goes back to the pool.
  void MarkReturned(SteadyClock::time_point now) { returned_at_ = now; }

 private:
  static constexpr auto kCheckAfterIdle = std::chrono::milliseconds(20);

  PGconn* const conn_;
  SteadyClock::time_point returned_at_{};  // Epoch: checked on first lease.
  std::array<bool, kStatementCount> prepared_{};
  bool broken_ = false;
};

// The fields of a claim this store made, for a one-statement Complete.
struct ClaimFields {
  RecordId id;
  Fingerprint fingerprint;
  TimePoint locked_until;
  TimePoint expires_at;
};

// The fields of the claims this store made, by token, for a one-statement
// Complete: a direct-mapped table (a token is random, so its first bytes
// index it evenly) whose slot a newer claim simply overwrites; the evicted
// claim's Complete then pays a SELECT. Fixed size and allocated once, so a
// claim neither allocates nor, with the striped locks, waits for claims of
// other slots; a map with one lock cost a claim ~3 us of CPU at 8 threads.
class ClaimMemo {
 public:
  ClaimMemo() : slots_(PostgresStore::kRememberedClaims) {}

  void Remember(const Token& token, const ClaimFields& fields) {
    const std::size_t i = Index(token);
    std::lock_guard<std::mutex> lock(Stripe(i));
    slots_[i] = Slot{token, true, fields};
  }

  std::optional<ClaimFields> Recall(const Token& token) {
    const std::size_t i = Index(token);
    std::lock_guard<std::mutex> lock(Stripe(i));
    const Slot& slot = slots_[i];
    if (!slot.used || slot.token != token) return std::nullopt;
    return slot.fields;
  }

  void Forget(const Token& token) {
    const std::size_t i = Index(token);
    std::lock_guard<std::mutex> lock(Stripe(i));
    Slot& slot = slots_[i];
    if (slot.used && slot.token == token) slot.used = false;
  }

 private:
  static_assert(std::has_single_bit(PostgresStore::kRememberedClaims));
  static constexpr std::size_t kStripes = 64;

  struct Slot {
    Token token;
    bool used = false;
    ClaimFields fields;
  };

  static std::size_t Index(const Token& token) {
    return static_cast<std::size_t>(token.Prefix64()) &
           (PostgresStore::kRememberedClaims - 1);
  }
  std::mutex& Stripe(std::size_t index) { return stripes_[index % kStripes]; }

  std::vector<Slot> slots_;
  std::array<std::mutex, kStripes> stripes_;
};

}  // namespace

class PostgresStore::Impl {
 public:
  Impl(const PostgresStoreOptions& options, std::string display)
      : options_(options),
        display_(std::move(display)),
        quoted_table_(Quote(options.table)),
        sql_(BuildSql(quoted_table_)) {}

  ~Impl() {
    std::lock_guard<std::mutex> lock(pool_mu_);
    idle_.clear();
  }

  const std::string& table() const { return options_.table; }
  const PostgresStoreOptions& options() const { return options_; }

  std::string Prefix() const {
    return "postgres store '" + display_ + "' table " + quoted_table_ + ": ";
  }

  Error ConnectionError(std::string_view op, PGconn* conn) const {
    return Error(ErrorCode::kUnavailable,
                 Prefix() + std::string(op) + ": connection failed: " +
                     Trimmed(conn != nullptr ? PQerrorMessage(conn) : ""));
  }

  Error ResultError(std::string_view op, const PGresult* r) const {
    const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    const std::string sqlstate = state != nullptr ? state : "";
    std::string message =
        Prefix() + std::string(op) + ": " +
        Trimmed(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
    if (!sqlstate.empty()) message += " (SQLSTATE " + sqlstate + ")";
    if (sqlstate == "57014") {
      message += "; statement_timeout=" +
                 std::to_string(options_.statement_timeout.count()) + " ms";
    }
    return Error(CodeOfSqlState(sqlstate), std::move(message));
  }

  // Every public call runs inside this boundary (idem/catch_exceptions.h).
  template <typename Fn>
  auto Boundary(std::string_view op, Fn&& fn) const -> decltype(fn()) {
    return CatchExceptions([&] { return Prefix() + std::string(op); },
                           std::forward<Fn>(fn));
  }

  // ---- Connections ---------------------------------------------------------

  Result<std::unique_ptr<Connection>> Connect() {
    const std::string timeout_s =
        std::to_string(options_.connect_timeout.count());
    const auto statement_ms = options_.statement_timeout.count();
    const auto client_ms =
        (options_.statement_timeout + PostgresStore::kClientGrace).count();
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
    add("host", options_.host);
    add("port", options_.port);
    add("dbname", options_.dbname);
    add("user", options_.user);
    add("password", options_.password);
    add("sslmode", options_.sslmode);
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
                       Prefix() + "connect: out of memory");
    }
    auto conn = std::make_unique<Connection>(raw);
    if (PQstatus(raw) != CONNECTION_OK) {
      return Unexpected(ConnectionError("connect", raw));
    }
    PQsetNoticeReceiver(raw, &IgnoreNotice, nullptr);
    if (PQsetnonblocking(raw, 1) != 0) {
      return Unexpected(ConnectionError("connect", raw));
    }
    return conn;
  }

  // A borrowed connection, returned to the pool when the lease ends, or
  // closed if it is not reusable.
  class Lease {
   public:
    Lease(Impl* impl, std::unique_ptr<Connection> conn)
        : impl_(impl), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept
        : impl_(other.impl_), conn_(std::move(other.conn_)) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_ != nullptr) impl_->Return(std::move(conn_));
    }
    Connection& operator*() const { return *conn_; }

   private:
    Impl* impl_;
    std::unique_ptr<Connection> conn_;
  };

  Result<Lease> Acquire() {
    const auto deadline = SteadyClock::now() + options_.acquire_timeout;
    std::unique_ptr<Connection> conn;
    {
      std::unique_lock<std::mutex> lock(pool_mu_);
      const bool ready = pool_cv_.wait_until(lock, deadline, [this] {
        return !idle_.empty() || open_ < options_.pool_size;
      });
      if (!ready) {
        return MakeError(
            ErrorCode::kUnavailable,
            Prefix() + "no free connection within acquire_timeout=" +
                std::to_string(options_.acquire_timeout.count()) +
                " ms (pool=" + std::to_string(options_.pool_size) + ")");
      }
      if (!idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
      } else {
        ++open_;  // This slot is ours while we connect.
      }
    }
    if (conn != nullptr && !conn->Reusable(SteadyClock::now())) conn.reset();
    if (conn == nullptr) {
      auto fresh = Connect();
      if (!fresh) {
        ReleaseSlot();
        return Unexpected(fresh.error());
      }
      conn = std::move(*fresh);
    }
    return Lease(this, std::move(conn));
  }

  void Return(std::unique_ptr<Connection> conn) {
    if (!conn->Idle()) {
      conn.reset();  // Closed outside the lock.
      ReleaseSlot();
      return;
    }
    conn->MarkReturned(SteadyClock::now());
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      idle_.push_back(std::move(conn));
    }
    pool_cv_.notify_one();
  }

  void ReleaseSlot() {
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      --open_;
    }
    pool_cv_.notify_one();
  }

  // ---- Round trips -----------------------------------------------------

  // Waits until the socket is ready for `events` or the deadline passes;
  // false on timeout or a poll failure.
  static bool WaitSocket(PGconn* conn, short events,
                         SteadyClock::time_point deadline) {
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

  // Flushes what a PQsend* call queued and collects its result, within the
  // client-side deadline. On any failure the connection is marked broken:
  // a half-read reply cannot be resynchronized.
  Result<PgResult> Await(Connection& c, std::string_view op) {
    PGconn* conn = c.get();
    const auto deadline = SteadyClock::now() + options_.statement_timeout +
                          PostgresStore::kClientGrace;
    auto timed_out = [&] {
      c.set_broken();
      return Error(
          ErrorCode::kUnavailable,
          Prefix() + std::string(op) + ": no reply within statement_timeout=" +
              std::to_string(options_.statement_timeout.count()) + " ms + " +
              std::to_string(PostgresStore::kClientGrace.count()) +
              " ms; connection closed");
    };
    auto failed = [&] {
      c.set_broken();
      return ConnectionError(op, conn);
    };
    for (;;) {
      const int f = PQflush(conn);
      if (f == 0) break;
      if (f < 0) return Unexpected(failed());
      if (!WaitSocket(conn, POLLIN | POLLOUT, deadline)) {
        return Unexpected(timed_out());
      }
      if (PQconsumeInput(conn) == 0) return Unexpected(failed());
    }
    PgResult first;
    for (;;) {
      while (PQisBusy(conn)) {
        if (!WaitSocket(conn, POLLIN, deadline)) {
          return Unexpected(timed_out());
        }
        if (PQconsumeInput(conn) == 0) return Unexpected(failed());
      }
      PGresult* r = PQgetResult(conn);
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
    if (first == nullptr) return Unexpected(failed());
    const ExecStatusType status = PQresultStatus(first.get());
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
      return first;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
      c.set_broken();
      Error e = ResultError(op, first.get());
      return MakeError(ErrorCode::kUnavailable, e.message());
    }
    return Unexpected(ResultError(op, first.get()));
  }

  // Runs prepared statement `id` with binary parameters and results,
  // preparing it on this connection first if needed.
  Result<PgResult> Run(Connection& c, StatementId id,
                       std::initializer_list<std::string_view> params,
                       std::string_view op) {
    return Run(c, id, std::span<const std::string_view>(params), op);
  }

  Result<PgResult> Run(Connection& c, StatementId id,
                       std::span<const std::string_view> params,
                       std::string_view op) {
    const StatementSpec& spec = Spec(id);
    if (params.size() != spec.types.size()) {
      return MakeError(ErrorCode::kInternal,
                       Prefix() + std::string(op) + ": wrong parameter count");
    }
    if (!c.prepared(id)) {
      if (PQsendPrepare(c.get(), spec.name, sql_[id].c_str(),
                        static_cast<int>(spec.types.size()),
                        spec.types.data()) == 0) {
        c.set_broken();
        return Unexpected(ConnectionError(op, c.get()));
      }
      auto prepared = Await(c, op);
      if (!prepared) return Unexpected(prepared.error());
      c.set_prepared(id);
    }
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
    if (PQsendQueryPrepared(c.get(), spec.name, static_cast<int>(params.size()),
                            values.data(), lengths.data(), formats.data(),
                            /*resultFormat=*/1) == 0) {
      c.set_broken();
      return Unexpected(ConnectionError(op, c.get()));
    }
    return Await(c, op);
  }

  // An unprepared statement with text parameters, for the schema.
  Result<PgResult> RunText(Connection& c, const std::string& sql,
                           const std::vector<std::string>& params,
                           std::string_view op) {
    std::vector<const char*> values;
    std::vector<Oid> types(params.size(), kTextOid);
    for (const std::string& p : params) values.push_back(p.c_str());
    if (PQsendQueryParams(c.get(), sql.c_str(), static_cast<int>(params.size()),
                          types.data(), values.data(), nullptr, nullptr,
                          /*resultFormat=*/0) == 0) {
      c.set_broken();
      return Unexpected(ConnectionError(op, c.get()));
    }
    return Await(c, op);
  }

  // ---- Schema --------------------------------------------------------------

  Status CreateOrMigrate(Connection& c) {
    auto run = [&](const std::string& sql,
                   const std::vector<std::string>& params = {}) {
      return RunText(c, sql, params, "schema");
    };
    if (auto r = run("BEGIN"); !r) return Unexpected(r.error());
    Status s = [&]() -> Status {
      auto r = run("SELECT pg_advisory_xact_lock(" +
                   std::to_string(kSchemaLockKey) + ")");
      if (!r) return Unexpected(r.error());
      r =
          run("CREATE TABLE IF NOT EXISTS idem_schema_versions ("
              "table_name text PRIMARY KEY, version integer NOT NULL)");
      if (!r) return Unexpected(r.error());
      r = run("SELECT version FROM idem_schema_versions WHERE table_name = $1",
              {table()});
      if (!r) return Unexpected(r.error());
      int version = 0;
      if (PQntuples(r->get()) == 1) {
        version = std::atoi(PQgetvalue(r->get(), 0, 0));
      } else {
        r = run("SELECT to_regclass($1) IS NOT NULL", {quoted_table_});
        if (!r) return Unexpected(r.error());
        if (std::string_view(PQgetvalue(r->get(), 0, 0)) == "t") {
          return MakeError(ErrorCode::kInvalidArgument,
                           Prefix() +
                               "the table exists but is not an idem table "
                               "(no row in idem_schema_versions); choose "
                               "another with table=");
        }
      }
      const auto& steps = SchemaSteps();
      if (version < 0 || version > static_cast<int>(steps.size())) {
        return MakeError(ErrorCode::kInvalidArgument,
                         Prefix() + "schema version " +
                             std::to_string(version) +
                             " is newer than this build knows (" +
                             std::to_string(steps.size()) + ")");
      }
      if (version == static_cast<int>(steps.size())) return {};
      const std::string index = Quote(table() + "_expires_at");
      for (std::size_t v = static_cast<std::size_t>(version); v < steps.size();
           ++v) {
        for (const std::string& sql : steps[v]) {
          r = run(Substitute(sql, quoted_table_, index));
          if (!r) return Unexpected(r.error());
        }
      }
      r =
          run("INSERT INTO idem_schema_versions (table_name, version) "
              "VALUES ($1, $2::integer) ON CONFLICT (table_name) "
              "DO UPDATE SET version = excluded.version",
              {table(), std::to_string(steps.size())});
      if (!r) return Unexpected(r.error());
      return {};
    }();
    if (!s) {
      // A broken connection is closed anyway; otherwise leave it clean.
      if (!c.broken()) (void)run("ROLLBACK");
      return s;
    }
    if (auto r = run("COMMIT"); !r) return Unexpected(r.error());
    return {};
  }

  Status Start() {
    auto lease = Acquire();
    if (!lease) return Unexpected(lease.error());
    return CreateOrMigrate(**lease);
  }

  // ---- Rows ------------------------------------------------------------

  Error DataLoss(const RecordId& id, std::string_view what) const {
    return Error(ErrorCode::kDataLoss, Prefix() + "the record of id " +
                                           id.ToHex().substr(0, 16) + "... " +
                                           std::string(what));
  }

  // Decodes the row's record (columns `first`..`first + 5`: state,
  // fingerprint, token, locked_until, expires_at, record) and checks it
  // against the columns.
  Result<Record> DecodeRow(const PGresult* r, int row, int first,
                           const RecordId& id) const {
    for (int col = first; col < first + 6; ++col) {
      if (PQgetisnull(r, row, col)) {
        return Unexpected(DataLoss(id, "has a NULL column"));
      }
    }
    Result<Record> record = DecodeRecord(Cell(r, row, first + 5));
    if (!record) {
      return Unexpected(
          DataLoss(id, "does not decode: " + record.error().message()));
    }
    const bool agree =
        IntCell(r, row, first) == static_cast<int>(record->state) &&
        Cell(r, row, first + 1) == record->fingerprint.view() &&
        Cell(r, row, first + 2) == record->token.view() &&
        IntCell(r, row, first + 3) == Ns(record->locked_until) &&
        IntCell(r, row, first + 4) == Ns(record->expires_at);
    if (!agree) return Unexpected(DataLoss(id, "disagrees with its columns"));
    return record;
  }

  Result<std::optional<Record>> SelectRecord(Connection& c, const RecordId& id,
                                             std::string_view op) {
    auto r = Run(c, kSelect, {id.view()}, op);
    if (!r) return Unexpected(r.error());
    if (PQntuples(r->get()) == 0) return std::optional<Record>();
    auto record = DecodeRow(r->get(), 0, 0, id);
    if (!record) return Unexpected(record.error());
    return std::optional<Record>(std::move(*record));
  }

  // ---- Claim -----------------------------------------------------------

  Result<ClaimResult> Claim(const RecordId& id, const Fingerprint& fp,
                            TimePoint now, Duration ttl,
                            Duration lock_timeout) {
    const Record fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
    const std::string blob = EncodeRecord(fresh);
    const auto locked_until = BigEndian64(Ns(fresh.locked_until));
    const auto expires_at = BigEndian64(Ns(fresh.expires_at));
    const auto now_be = BigEndian64(Ns(now));
    const std::array<std::string_view, 7> params = {id.view(),
                                                    fp.view(),
                                                    fresh.token.view(),
                                                    {locked_until.data(), 8},
                                                    {expires_at.data(), 8},
                                                    blob,
                                                    {now_be.data(), 8}};

    auto lease = Acquire();
    if (!lease) return Unexpected(lease.error());
    Connection& c = **lease;
    auto acquired = [&](bool takeover) {
      ClaimResult result;
      result.outcome = ClaimOutcome::kAcquired;
      result.token = fresh.token;
      result.takeover = takeover;
      result.locked_until = fresh.locked_until;
      claims_.Remember(fresh.token,
                       {id, fp, fresh.locked_until, fresh.expires_at});
      return result;
    };
    for (int attempt = 0; attempt < PostgresStore::kClaimAttempts; ++attempt) {
      if (claim_hook_) claim_hook_(ClaimAttemptPoint::kBeforeWrite, attempt);
      auto inserted = Run(c, kInsert, std::span(params).first(6), "claim");
      if (!inserted) return Unexpected(inserted.error());
      if (std::string_view(PQcmdTuples(inserted->get())) == "1") {
        return acquired(false);
      }
      // A record stood in the way. A new statement has a fresh snapshot,
      // so this also sees a row a concurrent claim committed after the
      // insert started.
      if (claim_hook_) claim_hook_(ClaimAttemptPoint::kBeforeRead, attempt);
      auto row = SelectRecord(c, id, "claim");
      if (!row) return Unexpected(row.error());
      if (!row->has_value()) continue;  // Gone (released, purged): again.
      if (auto blocked = ClaimBlockedBy(**row, fp, now)) return *blocked;
      // Expired, or its lock timed out: take it over if it still is.
      auto r = Run(c, kClaim, params, "claim");
      if (!r) return Unexpected(r.error());
      if (PQntuples(r->get()) == 1) {
        return acquired(Cell(r->get(), 0, 0) == std::string_view("\x01", 1));
      }
      // Changed in between (completed, taken over by another claim): again.
    }
    // Lost every race (store.h): in progress elsewhere, retry later.
    ClaimResult busy;
    busy.outcome = ClaimOutcome::kInProgress;
    busy.locked_until = now;
    return busy;
  }

  // ---- Complete, Release, Inspect, PurgeExpired ------------------------

  Result<bool> Complete(const RecordId& id, const Token& token,
                        const Response& response) {
    auto lease = Acquire();
    if (!lease) return Unexpected(lease.error());
    Connection& c = **lease;
    Record record;
    if (auto fields = claims_.Recall(token); fields && fields->id == id) {
      record.fingerprint = fields->fingerprint;
      record.locked_until = fields->locked_until;
      record.expires_at = fields->expires_at;
      record.token = token;
    } else {
      auto row = SelectRecord(c, id, "complete");
      if (!row) return Unexpected(row.error());
      if (!row->has_value() || (*row)->state != RecordState::kInProgress ||
          (*row)->token != token) {
        return false;
      }
      record = std::move(**row);
    }
    record.state = RecordState::kCompleted;
    // Non-owning: the caller's response outlives the encoding below.
    record.response = std::shared_ptr<const Response>(
        std::shared_ptr<const Response>(), &response);
    const std::string blob = EncodeRecord(record);
    auto r = Run(c, kComplete, {id.view(), token.view(), blob}, "complete");
    if (!r) return Unexpected(r.error());
    claims_.Forget(token);
    // The token is new for every claim: a row that still has it, in
    // progress, holds exactly the fields that claim wrote.
    return std::string_view(PQcmdTuples(r->get())) == "1";
  }

  Result<bool> Release(const RecordId& id, const Token& token) {
    auto lease = Acquire();
    if (!lease) return Unexpected(lease.error());
    auto r = Run(**lease, kRelease, {id.view(), token.view()}, "release");
    if (!r) return Unexpected(r.error());
    claims_.Forget(token);
    return std::string_view(PQcmdTuples(r->get())) == "1";
  }

  Result<bool> Revoke(const RecordId& id) {
    auto lease = Acquire();
    if (!lease) return Unexpected(lease.error());
    auto r = Run(**lease, kRevoke, {id.view()}, "revoke");
    if (!r) return Unexpected(r.error());
    // A remembered claim of this id stays in the table until its slot is
    // reused: harmless, since its Complete's UPDATE finds no row.
    return std::string_view(PQcmdTuples(r->get())) == "1";
  }

  void SetClaimHook(ClaimAttemptHook hook) { claim_hook_ = std::move(hook); }

  Result<std::optional<Record>> Inspect(const RecordId& id, TimePoint now) {
    auto lease = Acquire();
    if (!lease) return Unexpected(lease.error());
    auto row = SelectRecord(**lease, id, "inspect");
    if (!row) return Unexpected(row.error());
    if (!row->has_value() || (*row)->Expired(now)) {
      return std::optional<Record>();
    }
    return row;
  }

  Result<std::size_t> PurgeExpired(TimePoint now, std::size_t limit) {
    if (limit == 0) return std::size_t{0};
    auto lease = Acquire();
    if (!lease) return Unexpected(lease.error());
    const auto now_be = BigEndian64(Ns(now));
    std::size_t deleted = 0;
    while (deleted < limit) {
      const std::size_t batch =
          std::min(PostgresStore::kPurgeBatch, limit - deleted);
      const auto batch_be = BigEndian64(static_cast<std::int64_t>(batch));
      auto r = Run(**lease, kPurge,
                   {std::string_view(now_be.data(), 8),
                    std::string_view(batch_be.data(), 8)},
                   "purge");
      if (!r) return Unexpected(r.error());
      const auto n = static_cast<std::size_t>(
          std::strtoull(PQcmdTuples(r->get()), nullptr, 10));
      deleted += n;
      if (n < batch) break;
    }
    return deleted;
  }

 private:
  template <typename E>
  static tl::unexpected<Error> Unexpected(E&& e) {
    return tl::unexpected<Error>(std::forward<E>(e));
  }

  inline static const std::string kApplicationName = "idem";
  inline static const std::string kOne = "1";
  inline static const std::string kThree = "3";

  const PostgresStoreOptions options_;
  const std::string display_;
  const std::string quoted_table_;
  const std::array<std::string, kStatementCount> sql_;

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<Connection>> idle_;  // Guarded by pool_mu_.
  std::size_t open_ = 0;  // Idle, leased or connecting. Guarded by pool_mu_.

  ClaimMemo claims_;
  ClaimAttemptHook claim_hook_;  // Set before use, by tests only.
};

namespace {

std::string Display(const PostgresStoreOptions& o) {
  std::string s = "postgresql://";
  if (!o.user.empty()) s += o.user + "@";
  s += o.host;
  if (!o.port.empty()) s += ":" + o.port;
  return s + "/" + o.dbname;
}

}  // namespace

PostgresStore::PostgresStore(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

PostgresStore::~PostgresStore() = default;

Result<std::unique_ptr<PostgresStore>> PostgresStore::Open(
    const PostgresStoreOptions& options, const StoreOptions&) {
  return OpenNamed(options, Display(options));
}

Result<std::unique_ptr<PostgresStore>> PostgresStore::OpenNamed(
    const PostgresStoreOptions& options, std::string display) {
  return CatchExceptions(
      [&] { return "postgres store '" + display + "': open"; },
      [&]() -> Result<std::unique_ptr<PostgresStore>> {
        auto invalid = [&](const std::string& what) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "postgres store '" + display + "': " + what);
        };
        if (!ValidTableName(options.table)) {
          return invalid(
              "table name '" + options.table +
              "' is not a plain identifier (letters, digits and '_', "
              "not starting with a digit, at most " +
              std::to_string(kMaxTableName) + " bytes)");
        }
        if (options.pool_size < 1 || options.pool_size > 1024) {
          return invalid("pool must be in 1..1024");
        }
        if (options.acquire_timeout.count() < 0 ||
            options.acquire_timeout > std::chrono::hours(1)) {
          return invalid("acquire_timeout must be in 0..3600000 ms");
        }
        if (options.connect_timeout.count() < 1 ||
            options.connect_timeout > std::chrono::hours(1)) {
          return invalid("connect_timeout must be in 1..3600 s");
        }
        if (options.statement_timeout.count() < 1 ||
            options.statement_timeout > std::chrono::hours(1)) {
          return invalid("statement_timeout must be in 1..3600000 ms");
        }
        auto impl = std::make_unique<Impl>(options, display);
        if (Status s = impl->Start(); !s) return tl::unexpected(s.error());
        return std::unique_ptr<PostgresStore>(
            new PostgresStore(std::move(impl)));
      });
}

Result<std::unique_ptr<Store>> PostgresStore::OpenFromUri(
    StoreUri& uri, const StoreOptions& /*options: no clock needed*/) {
  if (uri.scheme() != "postgresql" && uri.scheme() != "postgres") {
    return tl::unexpected(uri.InvalidArgument(
        "scheme '" + uri.scheme() + "' is not postgresql or postgres"));
  }
  PostgresStoreOptions o;
  o.host = uri.host();
  o.port = uri.port();
  o.user = uri.user();
  o.password = uri.password();
  o.dbname = uri.path();
  if (o.dbname.empty() || o.dbname.find('/') != std::string::npos) {
    return tl::unexpected(
        uri.InvalidArgument("missing or malformed database name "
                            "(postgresql://user@host:port/dbname)"));
  }
  if (auto table = uri.TakeString("table")) o.table = *table;
  if (!ValidTableName(o.table)) {
    return tl::unexpected(uri.InvalidArgument(
        "table '" + o.table +
        "' is not a plain identifier (letters, digits and '_', not starting "
        "with a digit, at most " +
        std::to_string(kMaxTableName) + " bytes)"));
  }
  auto pool = uri.TakeUint("pool", 1, 1024);
  if (!pool) return tl::unexpected(pool.error());
  if (pool->has_value()) o.pool_size = static_cast<std::size_t>(**pool);
  // The same maxima (1 h) as Open checks for the typed options.
  auto acquire =
      uri.TakeDuration("acquire_timeout_ms", std::chrono::milliseconds(0),
                       std::chrono::milliseconds(3'600'000));
  if (!acquire) return tl::unexpected(acquire.error());
  if (acquire->has_value()) o.acquire_timeout = **acquire;
  auto connect = uri.TakeDuration("connect_timeout_s", std::chrono::seconds(1),
                                  std::chrono::seconds(3600));
  if (!connect) return tl::unexpected(connect.error());
  if (connect->has_value()) o.connect_timeout = **connect;
  auto statement =
      uri.TakeDuration("statement_timeout_ms", std::chrono::milliseconds(1),
                       std::chrono::milliseconds(3'600'000));
  if (!statement) return tl::unexpected(statement.error());
  if (statement->has_value()) o.statement_timeout = **statement;
  auto sslmode = uri.TakeEnum(
      "sslmode",
      {"disable", "allow", "prefer", "require", "verify-ca", "verify-full"});
  if (!sslmode) return tl::unexpected(sslmode.error());
  if (sslmode->has_value()) o.sslmode = **sslmode;
  if (Status unknown = uri.RejectUnknown(); !unknown) {
    return tl::unexpected(unknown.error());
  }
  auto store = OpenNamed(o, uri.redacted());
  if (!store) return tl::unexpected(store.error());
  return std::unique_ptr<Store>(std::move(*store));
}

Result<ClaimResult> PostgresStore::Claim(const RecordId& id,
                                         const Fingerprint& fp, TimePoint now,
                                         Duration ttl, Duration lock_timeout) {
  if (ttl <= Duration::zero() || lock_timeout <= Duration::zero()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     impl_->Prefix() + "ttl and lock_timeout must be positive");
  }
  return impl_->Boundary(
      "claim", [&] { return impl_->Claim(id, fp, now, ttl, lock_timeout); });
}

Result<bool> PostgresStore::Complete(const RecordId& id, const Token& token,
                                     const Response& response) {
  return impl_->Boundary("complete",
                         [&] { return impl_->Complete(id, token, response); });
}

Result<bool> PostgresStore::Release(const RecordId& id, const Token& token) {
  return impl_->Boundary("release", [&] { return impl_->Release(id, token); });
}

Result<std::optional<Record>> PostgresStore::Inspect(const RecordId& id,
                                                     TimePoint now) {
  return impl_->Boundary("inspect", [&] { return impl_->Inspect(id, now); });
}

Result<bool> PostgresStore::Revoke(const RecordId& id) {
  return impl_->Boundary("revoke", [&] { return impl_->Revoke(id); });
}

void PostgresStore::SetClaimAttemptHookForTesting(ClaimAttemptHook hook) {
  impl_->SetClaimHook(std::move(hook));
}

Result<std::size_t> PostgresStore::PurgeExpired(TimePoint now,
                                                std::size_t limit) {
  return impl_->Boundary("purge",
                         [&] { return impl_->PurgeExpired(now, limit); });
}

StoreInfo PostgresStore::Info() const {
  return StoreInfo{.name = "postgres",
                   .durable = true,
                   .shared_across_processes = true,
                   .max_concurrent_calls = impl_->options().pool_size,
                   .acquire_timeout = impl_->options().acquire_timeout};
}

const std::string& PostgresStore::table() const { return impl_->table(); }

}  // namespace idem
