// Exactly once without HTTP: RunOnce (once.h) whose work and the completion
// of its idempotency record commit in one transaction of the application's
// own SQL connection (sql_transaction.h; docs/GUIDE.md, "Exactly once").
//
//   idem::SqliteTransaction tx(store, db);     // or PostgresTransaction
//   auto result = idem::sql::RunOnceInTransaction(
//       guard, tx, tenant, message_id, "charge", payload,
//       [&](idem::SqliteTransaction& t) {
//         ... INSERT INTO charges ... on t.db() ...
//         return receipt;                      // std::string: the value
//       });
//   if (!result) ...                           // see the errors below
//   result->value;                             // fresh or replayed
//
// What happens, with the Guard's claim, wait, lock renewal and store-error
// rules as in RunOnce:
//  - The key is acquired: tx.Begin(), value = work(tx), the record completed
//    with `value` in the same transaction, tx.Commit(). The result is
//    kStored, and Finish makes no store call. When the Guard would not store
//    the value (over max_stored_response: kTooLarge; the route's
//    stored_statuses exclude 200: kStatusNotStored), the work commits alone
//    and the key is released: a repeat runs the work again.
//  - An earlier run's result is stored: kReplayed, and neither the
//    transaction nor `work` runs.
//  - Fail-open with the store unreachable (kFailOpen), or the Guard switched
//    off (kUnprotected): the work still runs and commits in its transaction,
//    unprotected; a repeat runs it again.
//
// Errors, besides RunOnce's (the key's, the store's):
//  - kAborted: the claim was lost while the work ran (its lock timed out
//    and another run took the key over, or the record was revoked): the
//    transaction was rolled back, so nothing `work` did was kept. Counted
//    `stale_complete`, warning logged. Retry with the same key: it gets the
//    other run's result (or kUnavailable while that run is in progress).
//  - tx.Begin()'s error: nothing ran; the key is released.
//  - Completing the record failed (a store error inside the transaction):
//    rolled back, the key released; the error is returned.
//  - tx.Commit()'s error: rolled back where a transaction is left, and the
//    key released (ClaimHandle::Abandon). When the commit's outcome is
//    unknown (PostgreSQL's connection broke during COMMIT) and it did
//    commit, the record is completed and the release finds nothing to
//    release: a repeat replays. Otherwise nothing was kept and a repeat
//    runs the work again. Either way the repeat is right.
//  - `work` throws: rolled back, the key released, the exception propagates.
// A release that fails (the store unreachable) leaves the record in_progress
// until its lock times out, as Guard::Run's.
//
// Thread-safety: as `tx`'s connection (one thread at a time) and Guard.

#ifndef IDEM_SQL_ONCE_H_
#define IDEM_SQL_ONCE_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/error.h"
#include "idem/guard.h"
#include "idem/once.h"
#include "idem/response.h"
#include "idem/sql_transaction.h"

namespace idem::sql {

// `Tx` as for RunInTransaction; `work(tx)` returns the std::string value.
template <typename Tx, typename Work>
Result<OnceResult> RunOnceInTransaction(
    Guard& guard, Tx& tx, std::string_view scope, std::string_view key,
    std::string_view operation, std::string_view input, Work&& work,
    std::shared_ptr<const GuardOptions> route = nullptr) {
  Decision d =
      detail::DecideOnce(guard, scope, key, operation, input, std::move(route));
  if (d.action == Action::kRespond) return detail::AnswerOnce(d);
  // kPassThrough leaves d.claim inactive: the work commits alone.
  Result<std::optional<Response>> done =
      MakeError(ErrorCode::kInternal, "not run");
  {
    detail::RenewWhileRunning renewing(guard, d.claim);
    // A throw from `work` rolls back (RunInTransactionAs) and releases the
    // key (the claim's destructor).
    done = RunInTransactionAs(
        tx, d.claim,
        [&](Tx& t) {
          Response r;
          r.body = work(t);
          return r;
        },
        [](const Response& r) -> const Response& { return r; });
  }
  if (!done) {
    // Nothing committed, or a commit of unknown outcome: released (a
    // completed record is not released).
    d.claim.Abandon();
    return tl::unexpected(std::move(done).error());
  }
  if (!done->has_value()) {
    d.claim.Abandon();  // Counts stale_complete and logs; no store call.
    return MakeError(ErrorCode::kAborted,
                     "another run took this key over while the work ran; "
                     "the transaction was rolled back");
  }
  Response& r = **done;
  if (d.action == Action::kPassThrough) {
    return OnceResult{std::move(r.body), false, detail::PassThroughStorage(d)};
  }
  const FinishResult finish = d.claim.Finish(r);
  return OnceResult{std::move(r.body), false, OnceStorageOf(finish)};
}

}  // namespace idem::sql

#endif  // IDEM_SQL_ONCE_H_
