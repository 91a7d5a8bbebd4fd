// The connection pool of the PostgreSQL store.
//
// A PGconn is used by one thread at a time; the pool hands it over under its
// mutex, which is also what lets ThreadSanitizer see the handover, since
// libpq itself is not instrumented. Connections are opened lazily (the first
// by Open, to create the schema and fail early). After an outage nothing
// needs reconnecting: a connection that failed was closed by the call that
// saw it fail, and an idle one that the server closed meanwhile is found
// readable (Connection::Reusable) and replaced before use, so after a server
// restart the first call already succeeds.

#include "postgres_pool.h"

#include <string>
#include <utility>

namespace idem::postgres_internal {

Pool::~Pool() {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.clear();
}

Result<Pool::Lease> Pool::Acquire() {
  const PostgresStoreOptions& o = settings_.options;
  const auto deadline = SteadyClock::now() + o.acquire_timeout;
  std::unique_ptr<Connection> conn;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const bool ready = cv_.wait_until(
        lock, deadline, [&] { return !idle_.empty() || open_ < o.pool_size; });
    if (!ready) {
      return MakeError(ErrorCode::kUnavailable,
                       settings_.prefix +
                           "no free connection within acquire_timeout=" +
                           std::to_string(o.acquire_timeout.count()) +
                           " ms (pool=" + std::to_string(o.pool_size) + ")");
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
    auto fresh = Connection::Open(settings_);
    if (!fresh) {
      ReleaseSlot();
      return tl::unexpected(fresh.error());
    }
    conn = std::move(*fresh);
  }
  return Lease(this, std::move(conn));
}

void Pool::Return(std::unique_ptr<Connection> conn) {
  if (!conn->Idle()) {
    conn.reset();  // Closed outside the lock.
    ReleaseSlot();
    return;
  }
  conn->MarkReturned(SteadyClock::now());
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(conn));
  }
  cv_.notify_one();
}

void Pool::ReleaseSlot() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --open_;
  }
  cv_.notify_one();
}

}  // namespace idem::postgres_internal
