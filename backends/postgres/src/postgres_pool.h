// The PostgreSQL store's connection pool: at most `pool` connections, opened
// lazily, each lent to one caller at a time.
//
// Thread-safety: Acquire may be called from any number of threads; a Lease
// is used by the thread that acquired it. The pool must outlive its leases.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_POOL_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "idem/error.h"
#include "postgres_connection.h"

namespace idem::postgres_internal {

class Pool {
 public:
  explicit Pool(const ConnectionSettings& settings) : settings_(settings) {}
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // A borrowed connection, returned to the pool when the lease ends, or
  // closed if it is not reusable.
  class Lease {
   public:
    Lease(Lease&& other) noexcept
        : pool_(other.pool_), conn_(std::move(other.conn_)) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_ != nullptr) pool_->Return(std::move(conn_));
    }
    Connection& operator*() const { return *conn_; }
    Connection* operator->() const { return conn_.get(); }

   private:
    friend class Pool;
    Lease(Pool* pool, std::unique_ptr<Connection> conn)
        : pool_(pool), conn_(std::move(conn)) {}

    Pool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  // A connection: an idle one that is still reusable, else a new one while
  // fewer than `pool` are open, else the next one returned within
  // acquire_timeout. Errors: kUnavailable when none is free within
  // acquire_timeout; what Connection::Open returns.
  Result<Lease> Acquire();

 private:
  void Return(std::unique_ptr<Connection> conn);
  // Gives up the slot of a connection that was closed or never opened.
  void ReleaseSlot();

  const ConnectionSettings& settings_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;  // Guarded by mu_.
  std::size_t open_ = 0;  // Idle, leased or connecting. Guarded by mu_.
};

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_POOL_H_
