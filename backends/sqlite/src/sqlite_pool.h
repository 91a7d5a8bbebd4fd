// The reader connections of the SQLite store (Inspect, and the schema setup
// at open): idle connections are kept for reuse, and a thread that finds
// none opens another, so the pool grows to the number of threads reading at
// once; at most kMaxIdle are kept when returned.
//
// Thread-safety: Acquire may be called concurrently; a Lease, and the
// connection it holds, is used by one thread at a time. Every Lease must end
// before the pool is destroyed.

#ifndef IDEM_BACKENDS_SQLITE_SQLITE_POOL_H_
#define IDEM_BACKENDS_SQLITE_SQLITE_POOL_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "idem/error.h"
#include "idem/sqlite_store_options.h"
#include "sqlite_connection.h"

namespace idem::sqlite_internal {

class ConnectionPool {
 public:
  // Idle connections kept for reuse; more are closed when returned.
  static constexpr std::size_t kMaxIdle = 64;

  // A borrowed connection, returned to the pool when the lease ends; a
  // connection left inside a transaction by a failed call is rolled back
  // first (or closed if that fails too).
  class Lease {
   public:
    Lease(ConnectionPool* pool, std::unique_ptr<Connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (conn_ != nullptr) pool_->Return(std::move(conn_));
    }
    Connection* operator->() const { return conn_.get(); }
    Connection& operator*() const { return *conn_; }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  // `options` must outlive the pool.
  explicit ConnectionPool(const SqliteStoreOptions& options)
      : options_(options) {}

  // An idle connection, or a new one. Errors: Connection::Open's.
  Result<Lease> Acquire();

 private:
  void Return(std::unique_ptr<Connection> conn);

  const SqliteStoreOptions& options_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;  // Guarded by mu_.
};

}  // namespace idem::sqlite_internal

#endif  // IDEM_BACKENDS_SQLITE_SQLITE_POOL_H_
