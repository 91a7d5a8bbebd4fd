// HookedTransaction: a transaction of the SqlTransaction shape
// (idem/sql_transaction.h: Begin, Commit, Rollback, Complete) with a hook
// that runs before its BEGIN, so that a test can make what races the
// handler (a takeover, another write) happen while the handler runs,
// before its transaction opens.
//
// Thread-safety: as the transaction it wraps; used by one thread.

#ifndef IDEM_TESTS_SUPPORT_HOOKED_TRANSACTION_H_
#define IDEM_TESTS_SUPPORT_HOOKED_TRANSACTION_H_

#include <functional>
#include <utility>

#include "idem/claim_handle.h"
#include "idem/error.h"
#include "idem/response.h"
#include "idem/sql_transaction.h"

namespace idem::testing {

template <typename Tx>
class HookedTransaction {
 public:
  // `tx` must outlive this object; an empty `before_begin` runs nothing.
  HookedTransaction(Tx& tx, std::function<void()> before_begin)
      : tx_(tx), before_begin_(std::move(before_begin)) {}

  Status Begin() {
    if (before_begin_) before_begin_();
    return tx_.Begin();
  }
  Status Commit() { return tx_.Commit(); }
  void Rollback() { tx_.Rollback(); }
  // ::idem::Response: the including test may have an adapter's Response in
  // scope (idem::beast::Response).
  Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                         const ::idem::Response& stored) {
    return tx_.Complete(claim, stored);
  }

 private:
  Tx& tx_;
  std::function<void()> before_begin_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_HOOKED_TRANSACTION_H_
