#include "sqlite_pool.h"

#include <memory>
#include <mutex>
#include <utility>

namespace idem::sqlite_internal {

Result<ConnectionPool::Lease> ConnectionPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Connection> conn = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(conn));
    }
  }
  IDEM_ASSIGN_OR_RETURN(auto conn, Connection::Open(options_));
  return Lease(this, std::move(conn));
}

void ConnectionPool::Return(std::unique_ptr<Connection> conn) {
  // Closed: a connection stuck in a transaction is useless.
  if (!conn->RollBackIfInTransaction()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(conn));
}

}  // namespace idem::sqlite_internal
