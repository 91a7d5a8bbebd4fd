// Exactly once in a RESTinio handler: the handler's business change and the
// completion of its idempotency record in one transaction of the
// application's own SQL connection (idem/sql_transaction.h; docs/GUIDE.md,
// "Exactly once"), for a handler taking the request's claim (handler.h):
//
//   idem->Protect(restinio::http_method_post(), "/transfers",
//       [&](RequestHandle req, ClaimHandle& claim, Responder done) {
//         asio::post(pool, [&, req, done = std::move(done)]() mutable {
//           idem::PostgresTransaction tx(store, conn);  // or Sqlite...
//           auto res = idem::restinio::RunInTransaction(tx, claim,
//               [&](auto& t) {
//                 ... INSERT ... on t.conn() ...
//                 return idem::Response{201, {}, body};
//               });
//           res ? done(std::move(*res)) : done(Problem500(res.error()));
//         });
//       });
//
// Thread-safety: as the transaction's connection (one thread at a time).

#ifndef IDEM_RESTINIO_TRANSACTION_H_
#define IDEM_RESTINIO_TRANSACTION_H_

#include <utility>

#include "idem/error.h"
#include "idem/guard.h"
#include "idem/restinio/handler.h"
#include "idem/sql_transaction.h"

namespace idem::restinio {

// sql::RunInTransaction for a RESTinio handler: `work(tx)` returns the
// idem::Response the handler answers with, which is what the adapter itself
// hands ClaimHandle::Finish, so the record completed in the transaction is
// byte for byte what the adapter would store, and its Finish afterwards
// makes no store call. Returns the work's response, or, when the claim was
// lost (another request took the key over while the transaction was open;
// rolled back), sql::ClaimLostResponse(claim): 409
// idempotency_request_in_progress, Retry-After 1. Errors (Begin, the
// completion, Commit: rolled back) are returned; answer them with a status
// the route does not store (a 5xx by default), and the adapter releases the
// key. A `work` that throws rolls back and the exception propagates (let it
// reach the adapter, or Fail the Responder: the key is released). An
// inactive claim (the request is unprotected) commits the work alone.
template <typename Tx, typename Work>
Result<Response> RunInTransaction(Tx& tx, ClaimHandle& claim, Work&& work) {
  return sql::RunInTransaction(tx, claim, std::forward<Work>(work));
}

}  // namespace idem::restinio

#endif  // IDEM_RESTINIO_TRANSACTION_H_
