// The PostgreSQL store's asynchronous claims and completions
// (Store::ClaimAsync, CompleteAsync): a thread of the store's own takes
// what the adapters' I/O threads hand over and sends each batch of them to
// the server as a few statements on one pooled connection, instead of one
// pool thread and one round trip per call.
//
// Why batches: the server's own work per statement (a transaction, its
// commit, the executor's start) costs it about as much as the rows it
// writes, so the claims of one batch go in one INSERT of many rows, its
// completions in one UPDATE. Each statement is its own transaction
// (autocommit): its rows commit together, and every call of a batch is
// answered after the statement that wrote it returned.
//
// A batch, on one connection:
//  1. the first claim of each id, in ascending id order: kInsertBatch
//     (INSERT ... ON CONFLICT DO NOTHING RETURNING id). An id inserted is
//     acquired, and the batch's other claims of that id are decided by
//     ClaimBlockedBy against the record it wrote, as if they came just
//     after it (in progress, or a mismatch).
//  2. the ids a record stood in the way of: kSelectBatch reads those rows,
//     and ClaimBlockedBy answers every claim of the batch that a row blocks
//     (a replay, a mismatch, in progress): a retry storm on one key costs
//     one row read, not a round trip per call.
//  3. what remains (a row gone or claimable) goes through the synchronous
//     claim's statements one call at a time (ClaimOn: its retries, its
//     takeover).
//  4. completions of distinct ids whose claim the store remembers:
//     kCompleteBatch (one UPDATE ... FROM unnest). The others go through
//     CompleteOn one at a time (a SELECT first).
// Steps 1 and 4 of a chunk (at most kMaxBatch claims and kMaxBatch
// completions) go to the server together (libpq's pipeline mode, a sync
// after each statement: each still its own transaction, and one that fails
// aborts nothing of the other). Then the claims are answered (steps 1-3),
// then the completions.
//
// Two batches in the pipeline: when calls are already queued for the
// thread's next batch (StoreThread::Pending), a batch's statements stay in
// flight while the thread takes that batch and sends its statements behind
// them; only then does it read the first batch's results and answer it.
// The server runs the second batch while the thread and the adapters' I/O
// threads work on the first one's answers, instead of each waiting for the
// other. Steps 2 and 3 (and completions of claims the store does not
// remember) need the pipeline empty: the thread first reads the results of
// everything sent behind them. A batch is never left in flight without a
// next batch to follow it: at most two are, and each is answered after the
// statement that wrote it returned.
//
// Bounds: a call that waited in the thread's queue longer than the store's
// acquire_timeout (statement_timeout + kClientGrace when that is 0) fails
// with kUnavailable without being sent (as a pool call that found no
// connection in time), checked before each statement it could go in; each
// statement is bounded by
// statement_timeout + kClientGrace as every round trip of the store. A
// statement that fails answers every call it carried with its error; a
// connection that broke answers every call of the batch not yet answered,
// and the pool closes it.
//
// Why one thread: two (each with its connection, an id's calls on one)
// were measured slower over HTTP on 2 cores, 11,256 against 12,315
// requests/s (benchmarks/http/NOTES.md): more wake-ups, and batches half as
// large.
//
// The cost: one connection, so a statement that waits in the server
// (a claim of a key whose row an application's transaction holds,
// PostgresTransaction(store)) holds up the calls behind it, up to
// statement_timeout, where a pool call would hold up only itself.
//
// Thread-safety: Claim and Complete may be called from any number of
// threads; everything else runs on the thread. The destructor (or Join)
// answers every call made before it; no call may race it.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_ASYNC_CALLS_H_
#define IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_ASYNC_CALLS_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "idem/error.h"
#include "idem/internal/claim_attempt_hook.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/store/claim_memo.h"
#include "idem/store/store_thread.h"
#include "postgres_connection.h"
#include "postgres_pool.h"

namespace idem::postgres_internal {

// What the calls need of the store. Every member outlives the AsyncCalls.
struct AsyncCallsHost {
  const std::string& prefix;  // Begins every error message.
  // The longest a call waits in the queue before it is sent.
  std::chrono::milliseconds queue_timeout;
  // A pooled connection once the store is connected (the store's own
  // Acquire: its errors are the calls').
  std::function<Result<Pool::Lease>()> acquire;
  ClaimMemo& claims;  // Claims acquired are remembered, completed forgotten.
  const ClaimAttemptHook& claim_hook;  // For ClaimOn (tests only).
};

class AsyncCalls {
 public:
  // Calls that one statement carries at most.
  static constexpr std::size_t kMaxBatch = 64;

  explicit AsyncCalls(AsyncCallsHost host);
  ~AsyncCalls();
  AsyncCalls(const AsyncCalls&) = delete;
  AsyncCalls& operator=(const AsyncCalls&) = delete;

  // Store::ClaimAsync and CompleteAsync, with their arguments checked.
  void Claim(const RecordId& id, const Fingerprint& fp, TimePoint now,
             Duration ttl, Duration lock_timeout,
             StoreCallback<ClaimResult> done);
  void Complete(const RecordId& id, const Token& token,
                std::shared_ptr<const Response> response,
                StoreCallback<bool> done);

  // Answers every call made so far, then ends the thread.
  void Join() { thread_.Join(); }

  // The most batches whose results were due at once, so far (tests: 2
  // once a batch was sent behind another). Call on the thread.
  std::size_t DeepestPipelineForTest() const { return deepest_; }

  // Runs `call` on the thread, among the calls: for tests that hold the
  // thread so that the calls made meanwhile form one batch.
  void PostForTest(std::function<void()> call) {
    thread_.Post(std::move(call));
  }

 private:
  using Deadline = std::chrono::steady_clock::time_point;
  struct PendingClaim {
    RecordId id;
    Record fresh;  // NewClaimRecord's: written when the id is acquired.
    TimePoint now;
    Deadline deadline;
    StoreCallback<ClaimResult> done;  // Empty once answered.
  };
  struct PendingComplete {
    RecordId id;
    Token token;
    std::shared_ptr<const Response> response;
    Deadline deadline;
    StoreCallback<bool> done;  // Empty once answered.
  };

  struct ClaimInsert;     // Step 1's statement, before it is sent.
  struct CompleteUpdate;  // Step 4's.
  struct Chunk;           // Both, sent together, and their results.
  struct Batch;           // What Flush took, its chunks in the pipeline.

  // StoreThread's after_batch: sends what the calls staged, then answers
  // the batches in the pipeline, all but this one when another batch is
  // queued behind it.
  void Flush();
  // Waits for the first reply to `batch` (the one batch due) or for calls
  // queued for the next batch, whichever comes first: true for the calls.
  // Replies due by `batch`'s reply_by, set here (a batch past it is left to
  // Finish, which fails it).
  bool CallsCameFirst(Batch& batch);
  // Wakes CallsCameFirst's poll, if it polls, after a call was queued.
  void WakePoll();
  // Prepares `batch`'s chunks and sends their statements on the pipeline's
  // connection (leased first if none is). On failure the batch's calls are
  // left to Finish, with the error.
  void Send(Batch& batch);
  // Collects `batch`'s results (unless done) and answers every call of it.
  void Finish(Batch& batch);
  // Reads the results of `batch`'s statements, if it is in the pipeline
  // and they are not read yet.
  void Collect(Batch& batch);
  // The connection for the statements of steps 2-3 and of the
  // completions made one at a time: the pipeline's, once every batch in it
  // is collected and pipeline mode is left. Errors: the connection broke.
  Result<Connection*> FollowUps();
  // Step 1's statement for the claims not answered yet (none left:
  // nullopt), and steps 1-3 with its result.
  std::optional<ClaimInsert> PrepareClaims(std::span<PendingClaim> batch);
  void FinishClaims(ClaimInsert& insert, Result<PgResult> inserted);
  // Step 4's statement (none when no completion is remembered), and step 4
  // with its result, if it was sent.
  CompleteUpdate PrepareCompletes(std::span<PendingComplete> batch);
  void FinishCompletes(CompleteUpdate& update,
                       std::optional<Result<PgResult>> updated);

  const AsyncCallsHost host_;
  // Staged by the thread's calls, sent by Flush. The thread's only.
  std::vector<PendingClaim> claims_;
  std::vector<PendingComplete> completes_;
  // Batches sent, in order, not yet answered (at most two), and the
  // connection their statements went on while any is. The thread's only.
  std::deque<std::unique_ptr<Batch>> sent_;
  std::optional<Pool::Lease> lease_;
  std::size_t deepest_ = 0;  // Most batches in flight at once (tests).
  // Readable when a call was queued while CallsCameFirst polled (an
  // eventfd; -1 if none could be made: it then waits for replies alone).
  const int wake_fd_;
  std::atomic<bool> polling_{false};  // CallsCameFirst polls wake_fd_.
  StoreThread thread_;  // Last: joined before the rest is destroyed.
};

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_POSTGRES_ASYNC_CALLS_H_
