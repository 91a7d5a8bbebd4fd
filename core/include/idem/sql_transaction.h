// Exactly once with a SQL store: the handler's business change and the
// completion of its idempotency record in one transaction of the
// application's own connection, so that both happen or neither does
// (docs/GUIDE.md, "Exactly once").
//
// The claim stays outside that transaction (a concurrent duplicate must see
// it at once); only the completion joins it. The stores' calls
// (SqliteStore::CompleteInTransaction, PostgresStore::CompleteInTransaction)
// return a TransactionCompletion; sql::RunInTransaction is the blocking
// helper that begins, runs the handler's work, completes, commits or rolls
// back, and tells the ClaimHandle, over a store's transaction type
// (SqliteTransaction in idem/sqlite_transaction.h, PostgresTransaction in
// idem/postgres_transaction.h).
//
// Thread-safety: as the connection the transaction runs on (one thread at a
// time).

#ifndef IDEM_SQL_TRANSACTION_H_
#define IDEM_SQL_TRANSACTION_H_

#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "idem/error.h"
#include "idem/guard.h"
#include "idem/problem.h"
#include "idem/response.h"

namespace idem {

// What completing a claim inside the caller's transaction did.
enum class TransactionCompletion {
  // The record is completed in the caller's transaction: it becomes visible
  // when, and only if, that transaction commits.
  kStored,
  // The claim is no longer the caller's: its lock timed out and another
  // request took the key over (or it was released, revoked, purged, or
  // completed already). Nothing was written; the caller must roll back,
  // since the other request is doing the same work.
  kClaimLost,
};

namespace sql {

// The answer RunInTransaction gives when the claim was lost: 409
// idempotency_request_in_progress with Retry-After 1 (a retry replays the
// request that took the key over, once it finished). Nothing was changed.
// With `claim`: its request's path as the problem's instance and its route's
// problem_type, as the Guard's own problems have.
inline Response ClaimLostResponse(const ClaimHandle* claim = nullptr) {
  Problem problem;
  problem.status = 409;
  problem.code = problem_code::kInProgress;
  problem.detail =
      "Another request took this idempotency key over while this one ran; "
      "nothing was changed. Retry to get that request's response.";
  problem.retry_after = std::chrono::seconds(1);
  if (claim != nullptr && claim->active()) {
    problem.instance = claim->instance();
    problem.type = claim->problem_type();
  }
  return MakeProblemResponse(problem);
}
inline Response ClaimLostResponse(const ClaimHandle& claim) {
  return ClaimLostResponse(&claim);
}

// RunInTransaction's steps for a caller whose work answers in a type of its
// own (an HTTP adapter's response, idem/beast/transaction.h): `work(tx)`
// returns an R, and `stored(r)` (taking R&) the idem::Response that
// ClaimHandle::Finish would be given for it (the adapter's one conversion).
// Returns the work's R, or nullopt when the claim was lost (rolled back; the
// caller answers ClaimLostResponse() in its own type). Errors and the claim
// as for RunInTransaction.
template <typename Tx, typename Work, typename ToStored>
auto RunInTransactionAs(Tx& tx, ClaimHandle& claim, Work&& work,
                        ToStored&& stored_form)
    -> Result<std::optional<std::invoke_result_t<Work&, Tx&>>> {
  using R = std::invoke_result_t<Work&, Tx&>;
  IDEM_RETURN_IF_ERROR(tx.Begin());
  std::optional<R> response;
  std::optional<Response> stored;
  try {
    response.emplace(work(tx));
    // Only when Finish would store it: a claim held, its status stored, its
    // body within max_stored_response.
    if (claim.active()) stored = claim.StorableResponse(stored_form(*response));
  } catch (...) {
    tx.Rollback();
    throw;
  }
  if (stored.has_value()) {
    auto completed = tx.Complete(claim, *stored);
    if (!completed) {
      tx.Rollback();
      return tl::unexpected(std::move(completed).error());
    }
    if (*completed == TransactionCompletion::kClaimLost) {
      tx.Rollback();
      claim.MarkClaimLostInTransaction();
      return std::optional<R>();
    }
    // Completed under the transaction's locks: no one can take the key over
    // before it ends, so renewing is over.
    claim.StopRenewal();
  }
  if (auto committed = tx.Commit(); !committed) {
    tx.Rollback();
    return tl::unexpected(std::move(committed).error());
  }
  if (stored.has_value()) claim.MarkCommittedInTransaction();
  return response;
}

// Runs `work(tx)` (returning Response) in one transaction of `tx`, and
// completes `claim`'s record in that transaction when the Guard would store
// the response (ClaimHandle::StorableResponse):
//   1. tx.Begin(); an error is returned, nothing ran.
//   2. response = work(tx). If it throws: tx.Rollback() and the exception
//      propagates (the Guard releases the key).
//   3. Storable and the claim active: tx.Complete(claim, stored).
//      kClaimLost: tx.Rollback(), the claim is told
//      (MarkClaimLostInTransaction) and ClaimLostResponse(claim) is
//      returned. An
//      error: tx.Rollback() and the error is returned.
//   4. tx.Commit(). An error: tx.Rollback() and the error is returned (the
//      claim is finished as usual then: a commit whose outcome is unknown
//      leaves either a completed record, which a release does not remove, so
//      a retry replays, or nothing, and the release lets a retry run again).
//   5. Completed in the transaction: claim.MarkCommittedInTransaction(), so
//      that Finish makes no store call. Returns the response.
// A response the Guard would not store (a status not stored, a body over
// max_stored_response), or an inactive claim (the request runs
// unprotected), commits the work alone, and Finish then does what it always
// does. The work rolls back by throwing.
//
// `Tx` provides: Status Begin(); Status Commit(); void Rollback() (never
// throws, best effort); Result<TransactionCompletion> Complete(const
// ClaimHandle&, const Response& stored).
template <typename Tx, typename Work>
Result<Response> RunInTransaction(Tx& tx, ClaimHandle& claim, Work&& work) {
  IDEM_ASSIGN_OR_RETURN(
      std::optional<Response> response,
      RunInTransactionAs(
          tx, claim, std::forward<Work>(work),
          [](const Response& r) -> const Response& { return r; }));
  if (!response.has_value()) return ClaimLostResponse(claim);
  return std::move(*response);
}

}  // namespace sql
}  // namespace idem

#endif  // IDEM_SQL_TRANSACTION_H_
