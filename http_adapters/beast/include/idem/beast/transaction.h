// Exactly once in a Beast handler: the handler's business change and the
// completion of its idempotency record in one transaction of the
// application's own SQL connection (idem/sql_transaction.h; docs/GUIDE.md,
// "Exactly once"), for a handler taking the request's claim (handler.h,
// forms 4-6):
//
//   idem->Protect(http::verb::post, "/transfers");
//   // The handler: void(Request, ClaimHandle&, Responder), blocking SQL on
//   // a pool of the application's own.
//   [&](beast::Request req, ClaimHandle& claim, beast::Responder done) {
//     asio::post(pool, [&, req = std::move(req),
//                       done = std::move(done)]() mutable {
//       idem::SqliteTransaction tx(store, db);   // or PostgresTransaction
//       auto res = idem::beast::RunInTransaction(tx, claim, [&](auto& t) {
//         ... INSERT ... on t.db() ...
//         return beast::Response{http::status::created, req.version()};
//       });
//       res ? done(std::move(*res)) : done(Make500(res.error()));
//     });
//   }
//
// Thread-safety: as the transaction's connection (one thread at a time).

#ifndef IDEM_BEAST_TRANSACTION_H_
#define IDEM_BEAST_TRANSACTION_H_

#include <optional>
#include <utility>

#include "idem/beast/convert.h"
#include "idem/beast/handler.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "idem/sql_transaction.h"

namespace idem::beast {

// sql::RunInTransaction for a handler answering in Beast's response type:
// `work(tx)` returns a beast::Response. The record is completed, in the
// transaction, with exactly what IdempotentHandler would itself store for
// that response (ToStored, convert.h), so the adapter's Finish afterwards
// makes no store call. Returns the work's response (framed, as the adapter
// sends it), or, when the claim was lost (another request took the key
// over while the transaction was open; rolled back),
// sql::ClaimLostResponse(claim) as a Beast response: 409
// idempotency_request_in_progress, Retry-After 1, with the work's HTTP version
// and keep-alive. Errors (Begin, the completion, Commit: rolled back) are
// returned; answer them with a status the route does not store (a 5xx by
// default), and the adapter releases the key. A `work` that throws rolls back
// and the exception propagates (let it reach the adapter, or Fail the
// Responder: the key is released). An inactive claim (the request is
// unprotected) commits the work alone.
template <typename Tx, typename Work>
Result<Response> RunInTransaction(Tx& tx, ClaimHandle& claim, Work&& work) {
  unsigned version = 11;
  bool keep_alive = true;
  IDEM_ASSIGN_OR_RETURN(
      std::optional<Response> response,
      sql::RunInTransactionAs(tx, claim, std::forward<Work>(work),
                              [&](Response& r) {
                                version = r.version();
                                keep_alive = r.keep_alive();
                                return ToStored(r, nullptr);
                              }));
  if (!response.has_value()) {
    return ToBeast(sql::ClaimLostResponse(claim), version, keep_alive);
  }
  return std::move(*response);
}

}  // namespace idem::beast

#endif  // IDEM_BEAST_TRANSACTION_H_
