// See postgres_async_calls.h.

#include "postgres_async_calls.h"

#include <libpq-fe.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "idem/store/catch_exceptions.h"
#include "idem/store/record_codec.h"
#include "postgres_binary.h"
#include "postgres_row_calls.h"
#include "postgres_sql.h"

namespace idem::postgres_internal {
namespace {

// Answers `call` (once: its callback is emptied first).
template <typename Call, typename T>
void Answer(Call& call, Result<T> result) {
  auto done = std::move(call.done);
  call.done = nullptr;
  done(std::move(result));
}

template <typename Call>
bool Answered(const Call& call) {
  return !call.done;
}

// Answers every call of `calls` not answered yet that waited in the queue
// past its deadline: kUnavailable, nothing sent.
template <typename T, typename Call>
void ExpireLate(std::span<Call> calls, const std::string& prefix,
                std::string_view op, std::chrono::milliseconds bound) {
  const auto now = std::chrono::steady_clock::now();
  for (Call& call : calls) {
    if (Answered(call) || call.deadline > now) continue;
    Answer(call, Result<T>(MakeError(
                     ErrorCode::kUnavailable,
                     prefix + std::string(op) + ": waited longer than " +
                         std::to_string(bound.count()) +
                         " ms for the store's thread (acquire_timeout, or "
                         "statement_timeout + grace when it is 0); not sent")));
  }
}

// Pointers to the calls of `calls` not answered yet, sorted by id (stably:
// the calls of one id in the order they were made).
template <typename Call>
std::vector<Call*> SortedById(std::span<Call> calls) {
  std::vector<Call*> sorted;
  sorted.reserve(calls.size());
  for (Call& call : calls) {
    if (!Answered(call)) sorted.push_back(&call);
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](Call* a, Call* b) {
    return a->id.view() < b->id.view();
  });
  return sorted;
}

// SortedById, the first call of each id in `first`, every later one of that
// id in `again` (in the order they were made).
template <typename Call>
void SplitById(std::span<Call> calls, std::vector<Call*>& first,
               std::vector<Call*>& again) {
  first = SortedById(calls);
  auto out = first.begin();
  for (auto it = first.begin(); it != first.end(); ++it) {
    if (out != first.begin() && (*(out - 1))->id == (*it)->id) {
      again.push_back(*it);
    } else {
      *out++ = *it;
    }
  }
  first.erase(out, first.end());
}

// The position in `sorted` (by id) of the call of `id`, or nullopt.
template <typename Call>
std::optional<std::size_t> FindId(const std::vector<Call*>& sorted,
                                  std::string_view id) {
  auto it = std::lower_bound(
      sorted.begin(), sorted.end(), id,
      [](Call* call, std::string_view v) { return call->id.view() < v; });
  if (it == sorted.end() || (*it)->id.view() != id) return std::nullopt;
  return static_cast<std::size_t>(it - sorted.begin());
}

// The chunk of at most AsyncCalls::kMaxBatch calls of `calls` from `i` on
// (empty past its end).
template <typename Call>
std::span<Call> Slice(std::span<Call> calls, std::size_t i) {
  if (i >= calls.size()) return {};
  return calls.subspan(i, std::min(AsyncCalls::kMaxBatch, calls.size() - i));
}

// A batch's error for its calls nothing else answered: the connection broke
// before their statements went out or their results came back.
Error NotSent(const std::string& prefix) {
  return Error(ErrorCode::kUnavailable,
               prefix +
                   "connection failed earlier in the same batch of "
                   "asynchronous calls; not sent");
}

}  // namespace

AsyncCalls::AsyncCalls(AsyncCallsHost host)
    : host_(std::move(host)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      thread_([this] { Flush(); }) {}

AsyncCalls::~AsyncCalls() {
  Join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void AsyncCalls::Claim(const RecordId& id, const Fingerprint& fp, TimePoint now,
                       Duration ttl, Duration lock_timeout,
                       StoreCallback<ClaimResult> done) {
  PendingClaim call{.id = id,
                    .fresh = NewClaimRecord(fp, now, ttl, lock_timeout),
                    .now = now,
                    .deadline = Deadline::clock::now() + host_.queue_timeout,
                    .done = std::move(done)};
  thread_.Post([this, call = std::move(call)]() mutable {
    try {
      claims_.push_back(std::move(call));
    } catch (const std::bad_alloc&) {
      if (!Answered(call)) {
        Answer(call, Result<ClaimResult>(
                         MakeError(ErrorCode::kResourceExhausted,
                                   host_.prefix + "claim: out of memory")));
      }
    }
  });
  WakePoll();
}

void AsyncCalls::Complete(const RecordId& id, const Token& token,
                          std::shared_ptr<const Response> response,
                          StoreCallback<bool> done) {
  PendingComplete call{.id = id,
                       .token = token,
                       .response = std::move(response),
                       .deadline = Deadline::clock::now() + host_.queue_timeout,
                       .done = std::move(done)};
  thread_.Post([this, call = std::move(call)]() mutable {
    try {
      completes_.push_back(std::move(call));
    } catch (const std::bad_alloc&) {
      if (!Answered(call)) {
        Answer(call, Result<bool>(
                         MakeError(ErrorCode::kResourceExhausted,
                                   host_.prefix + "complete: out of memory")));
      }
    }
  });
  WakePoll();
}

// Step 1's statement for one chunk of claims: the calls by id, each id's
// first call leading its group into the INSERT; the others of the group
// are decided after it, as if they came just after it (a retry storm on
// one key is one row read, not a round trip per call).
struct AsyncCalls::ClaimInsert {
  explicit ClaimInsert(std::span<PendingClaim> calls, std::size_t ids_count)
      : batch(calls),
        ids(kByteaOid, ids_count, RecordId::kSize),
        fingerprints(kByteaOid, ids_count, Fingerprint::kSize),
        tokens(kByteaOid, ids_count, Token::kSize),
        locked_until(kInt8Oid, ids_count, 8),
        expires_at(kInt8Oid, ids_count, 8),
        records(kByteaOid, ids_count, 128) {}
  std::span<PendingClaim* const> group(std::size_t g) const {
    return std::span(sorted).subspan(starts[g], starts[g + 1] - starts[g]);
  }
  std::span<PendingClaim> batch;
  std::vector<PendingClaim*> sorted;
  std::vector<std::size_t> starts;  // Of each group in `sorted`, then its end.
  std::vector<PendingClaim*> leaders;
  BinaryArray ids, fingerprints, tokens, locked_until, expires_at, records;
  std::array<std::string_view, 6> params;
};

// Step 4's statement for one chunk of completions, and the completions
// that go through the synchronous statements.
struct AsyncCalls::CompleteUpdate {
  std::span<PendingComplete> batch;
  std::vector<PendingComplete*> first;    // In the UPDATE, in its order.
  std::vector<PendingComplete*> singles;  // One at a time, after it.
  std::optional<BinaryArray> ids, tokens, records, locked_until;
  std::array<std::string_view, 4> params;
};

// One chunk of a batch: at most kMaxBatch claims and kMaxBatch
// completions, their statements (sent together) and, once read, their
// results.
struct AsyncCalls::Chunk {
  bool updating() const { return update && !update->first.empty(); }
  std::optional<ClaimInsert> insert;
  std::optional<CompleteUpdate> update;
  std::vector<Connection::PipelinedStatement> statements;
  std::vector<Result<PgResult>> results;  // Once collected.
};

// The calls of one Flush and their chunks, held by pointer: the chunks'
// statements point into the calls and into the chunks.
struct AsyncCalls::Batch {
  // Whether its statements went out and their results are still to read.
  bool due() const { return sent && !collected; }
  std::vector<PendingClaim> claims;
  std::vector<PendingComplete> completes;
  std::vector<std::unique_ptr<Chunk>> chunks;
  bool sent = false;
  bool collected = false;
  // When its results must have come, once the thread started waiting for
  // them (else ReplyDeadline when Collect starts).
  std::optional<SteadyClock::time_point> reply_by;
  std::optional<Error> failure;  // For every call not answered otherwise.
};

void AsyncCalls::Flush() {
  if (!claims_.empty() || !completes_.empty()) {
    try {
      auto batch = std::make_unique<Batch>();
      sent_.push_back(nullptr);  // Its place, before the calls move in.
      sent_.back() = std::move(batch);
    } catch (const std::bad_alloc&) {
      const Error error(ErrorCode::kResourceExhausted,
                        host_.prefix + "asynchronous calls: out of memory");
      for (PendingClaim& call : claims_) {
        Answer(call, Result<ClaimResult>(tl::unexpected(error)));
      }
      for (PendingComplete& call : completes_) {
        Answer(call, Result<bool>(tl::unexpected(error)));
      }
      claims_.clear();
      completes_.clear();
    }
  }
  if (!claims_.empty() || !completes_.empty()) {
    Batch* batch = sent_.back().get();
    batch->claims.swap(claims_);
    batch->completes.swap(completes_);
    Send(*batch);
    std::size_t due = 0;
    for (const auto& b : sent_) due += b->due() ? 1 : 0;
    deepest_ = std::max(deepest_, due);
  }
  while (!sent_.empty()) {
    Batch& front = *sent_.front();
    // Only the batch just sent may stay in flight, and only while another
    // batch is queued behind it: that batch's Flush answers this one.
    if (sent_.size() == 1 && front.due() && lease_ && !(*lease_)->broken() &&
        CallsCameFirst(front)) {
      return;
    }
    Finish(front);
    sent_.pop_front();
  }
  if (lease_) {
    // Every result is read: out of pipeline mode and back to the pool (which
    // closes a connection that broke).
    (void)(*lease_)->EndPipeline();
    lease_.reset();
  }
}

bool AsyncCalls::CallsCameFirst(Batch& batch) {
  Connection& c = **lease_;
  batch.reply_by = c.ReplyDeadline();
  for (;;) {
    // Set before looking at the queue: a call queued after the look sees
    // it and wakes the poll (Claim, Complete).
    polling_.store(true);
    if (thread_.Pending()) break;
    const Connection::Woken woken = c.WaitForReply(wake_fd_, *batch.reply_by);
    polling_.store(false);
    std::uint64_t count = 0;
    while (::read(wake_fd_, &count, sizeof count) > 0) {
    }
    // A wake left from an earlier wait finds the queue taken: wait again.
    if (woken != Connection::Woken::kWake) return false;
  }
  polling_.store(false);
  return true;
}

void AsyncCalls::WakePoll() {
  if (!polling_.load() || !polling_.exchange(false)) return;
  const std::uint64_t one = 1;
  // Fails only with the counter at its maximum: the poll is woken anyway.
  (void)!::write(wake_fd_, &one, sizeof one);
}

void AsyncCalls::Send(Batch& batch) {
  const Status sent = CatchExceptions(
      [&] { return host_.prefix + "asynchronous calls"; },
      [&]() -> Status {
        // A batch of calls that all waited too long needs no connection.
        ExpireLate<ClaimResult>(std::span(batch.claims), host_.prefix, "claim",
                                host_.queue_timeout);
        ExpireLate<bool>(std::span(batch.completes), host_.prefix, "complete",
                         host_.queue_timeout);
        if (std::all_of(batch.claims.begin(), batch.claims.end(),
                        Answered<PendingClaim>) &&
            std::all_of(batch.completes.begin(), batch.completes.end(),
                        Answered<PendingComplete>)) {
          return {};
        }
        if (!lease_) {
          IDEM_ASSIGN_OR_RETURN(Pool::Lease lease, host_.acquire());
          // The INSERT is prepared (its plan does not depend on the table's
          // size), and only outside pipeline mode: before any batch is in
          // flight on the connection, whatever the first batch holds.
          IDEM_RETURN_IF_ERROR(lease->Prepare(kInsertBatch, "claim"));
          lease_.emplace(std::move(lease));
        }
        Connection& c = **lease_;
        if (c.broken()) return tl::unexpected(NotSent(host_.prefix));
        // The k-th chunk of the claims and the k-th of the completions go
        // together: their INSERT and UPDATE in one round trip.
        for (std::size_t i = 0;
             i < batch.claims.size() || i < batch.completes.size();
             i += kMaxBatch) {
          auto chunk = std::make_unique<Chunk>();
          if (auto claims = Slice(std::span(batch.claims), i);
              !claims.empty()) {
            chunk->insert = PrepareClaims(claims);
          }
          if (auto completes = Slice(std::span(batch.completes), i);
              !completes.empty()) {
            chunk->update = PrepareCompletes(completes);
          }
          if (chunk->insert) {
            chunk->statements.push_back(
                {kInsertBatch, chunk->insert->params, "claim"});
          }
          if (chunk->updating()) {
            chunk->statements.push_back(
                {kCompleteBatch, chunk->update->params, "complete"});
          }
          batch.chunks.push_back(std::move(chunk));
        }
        for (const auto& chunk : batch.chunks) {
          // Once one chunk went out, Collect reads them all (a connection
          // that broke on the way answers every one with its error).
          batch.sent = batch.sent || !chunk->statements.empty();
          IDEM_RETURN_IF_ERROR(c.SendPipelined(chunk->statements));
        }
        return {};
      });
  if (!sent) batch.failure = sent.error();
}

void AsyncCalls::Collect(Batch& batch) {
  if (!batch.due()) return;
  batch.collected = true;
  for (const auto& chunk : batch.chunks) {
    chunk->results = (*lease_)->CollectPipelined(
        chunk->statements, batch.reply_by.value_or((*lease_)->ReplyDeadline()));
  }
}

Result<Connection*> AsyncCalls::FollowUps() {
  for (const auto& b : sent_) Collect(*b);
  if (!lease_ || (*lease_)->broken()) {
    return tl::unexpected(NotSent(host_.prefix));
  }
  IDEM_RETURN_IF_ERROR((*lease_)->EndPipeline());
  return &**lease_;
}

void AsyncCalls::Finish(Batch& batch) {
  const Status finished = CatchExceptions(
      [&] { return host_.prefix + "asynchronous calls"; },
      [&]() -> Status {
        Collect(batch);
        // A chunk's results, in its statements' order: the INSERT's first,
        // the UPDATE's last (none read when the batch was never sent).
        for (const auto& chunk : batch.chunks) {
          auto result = [&](bool first) {
            if (chunk->results.size() != chunk->statements.size()) {
              return Result<PgResult>(tl::unexpected(
                  batch.failure.value_or(NotSent(host_.prefix))));
            }
            return std::move(first ? chunk->results.front()
                                   : chunk->results.back());
          };
          if (chunk->insert) FinishClaims(*chunk->insert, result(true));
          if (chunk->update) {
            std::optional<Result<PgResult>> updated;
            if (chunk->updating()) updated = result(false);
            FinishCompletes(*chunk->update, std::move(updated));
          }
        }
        return {};
      });
  if (!finished && !batch.failure) batch.failure = finished.error();
  const Error failure = batch.failure.value_or(NotSent(host_.prefix));
  for (PendingClaim& call : batch.claims) {
    if (!Answered(call)) {
      Answer(call, Result<ClaimResult>(tl::unexpected(failure)));
    }
  }
  for (PendingComplete& call : batch.completes) {
    if (!Answered(call)) Answer(call, Result<bool>(tl::unexpected(failure)));
  }
}

std::optional<AsyncCalls::ClaimInsert> AsyncCalls::PrepareClaims(
    std::span<PendingClaim> batch) {
  ExpireLate<ClaimResult>(batch, host_.prefix, "claim", host_.queue_timeout);
  std::vector<PendingClaim*> sorted = SortedById(batch);
  if (sorted.empty()) return std::nullopt;
  std::size_t distinct = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i == 0 || sorted[i]->id != sorted[i - 1]->id) ++distinct;
  }
  std::optional<ClaimInsert> insert(std::in_place, batch, distinct);
  insert->sorted = std::move(sorted);
  for (std::size_t i = 0; i < insert->sorted.size(); ++i) {
    PendingClaim* call = insert->sorted[i];
    if (i != 0 && call->id == insert->sorted[i - 1]->id) continue;
    insert->starts.push_back(i);
    insert->leaders.push_back(call);
    const Record& fresh = call->fresh;
    insert->ids.Add(call->id.view());
    insert->fingerprints.Add(fresh.fingerprint.view());
    insert->tokens.Add(fresh.token.view());
    insert->locked_until.Add(ToUnixNanos(fresh.locked_until));
    insert->expires_at.Add(ToUnixNanos(fresh.expires_at));
    insert->records.Add(EncodeRecord(fresh));
  }
  insert->starts.push_back(insert->sorted.size());
  insert->params = {insert->ids.view(),        insert->fingerprints.view(),
                    insert->tokens.view(),     insert->locked_until.view(),
                    insert->expires_at.view(), insert->records.view()};
  return insert;
}

void AsyncCalls::FinishClaims(ClaimInsert& insert, Result<PgResult> inserted) {
  const std::vector<PendingClaim*>& leaders = insert.leaders;
  auto group = [&](std::size_t g) { return insert.group(g); };
  auto fail_all = [&](const Error& error) {
    for (PendingClaim& call : insert.batch) {
      if (!Answered(call)) {
        Answer(call, Result<ClaimResult>(tl::unexpected(error)));
      }
    }
  };
  // What goes through the synchronous statements, one call at a time.
  std::vector<PendingClaim*> again;
  // Answers `call` as the record `existing` blocks it, if it does.
  auto decide = [&](PendingClaim& call, const Record& existing) {
    if (auto answer =
            ClaimBlockedBy(existing, call.fresh.fingerprint, call.now)) {
      Answer(call, Result<ClaimResult>(std::move(*answer)));
    } else {
      again.push_back(&call);  // Claimable: a takeover.
    }
  };

  // 1. The INSERT's answer: the ids it inserted are acquired.
  const std::size_t n = leaders.size();
  if (!inserted) return fail_all(inserted.error());
  std::vector<bool> acquired(n, false);
  for (int row = 0; row < PQntuples(inserted->get()); ++row) {
    if (auto g = FindId(leaders, Cell(inserted->get(), row, 0))) {
      acquired[*g] = true;
    }
  }
  std::vector<PendingClaim*> blocked;  // Leaders, sorted by id.
  std::vector<std::size_t> blocked_groups;
  for (std::size_t g = 0; g < n; ++g) {
    PendingClaim& leader = *leaders[g];
    if (!acquired[g]) {
      blocked.push_back(&leader);
      blocked_groups.push_back(g);
      continue;
    }
    host_.claims.Remember(leader.fresh.token,
                          {leader.id, leader.fresh.fingerprint,
                           leader.fresh.locked_until, leader.fresh.expires_at});
    Answer(leader, Result<ClaimResult>(ClaimAcquired(leader.fresh, false)));
    for (PendingClaim* call : group(g).subspan(1)) decide(*call, leader.fresh);
  }

  // 2. One SELECT of the rows in the way; ClaimBlockedBy answers most.
  if (!blocked.empty()) {
    BinaryArray blocked_ids(kByteaOid, blocked.size(), RecordId::kSize);
    for (const PendingClaim* call : blocked) blocked_ids.Add(call->id.view());
    Result<Connection*> c = FollowUps();
    if (!c) return fail_all(c.error());
    Result<PgResult> rows =
        (*c)->Run(kSelectBatch, {blocked_ids.view()}, "claim");
    if (!rows) return fail_all(rows.error());
    std::vector<bool> found(blocked.size(), false);
    for (int row = 0; row < PQntuples(rows->get()); ++row) {
      auto b = FindId(blocked, Cell(rows->get(), row, 0));
      if (!b || found[*b]) continue;
      found[*b] = true;
      const auto calls = group(blocked_groups[*b]);
      Result<Record> record =
          RecordOfRow(rows->get(), row, 1, host_.prefix, calls[0]->id);
      for (PendingClaim* call : calls) {
        if (!record) {
          Answer(*call, Result<ClaimResult>(tl::unexpected(record.error())));
        } else {
          decide(*call, *record);
        }
      }
    }
    // Gone since the INSERT (released, purged): the synchronous statements.
    for (std::size_t b = 0; b < blocked.size(); ++b) {
      if (found[b]) continue;
      for (PendingClaim* call : group(blocked_groups[b])) again.push_back(call);
    }
  }

  // 3. One call at a time, as Store::Claim does.
  if (again.empty()) return;
  Result<Connection*> c = FollowUps();
  if (!c) return fail_all(c.error());
  for (PendingClaim* call : again) {
    if ((*c)->broken()) return;  // Finish answers the rest.
    Result<ClaimResult> result = ClaimOn(
        **c, host_.prefix, call->id, call->fresh, call->now, host_.claim_hook);
    if (result && result->outcome == ClaimOutcome::kAcquired) {
      host_.claims.Remember(call->fresh.token,
                            {call->id, call->fresh.fingerprint,
                             call->fresh.locked_until, call->fresh.expires_at});
    }
    Answer(*call, std::move(result));
  }
}

AsyncCalls::CompleteUpdate AsyncCalls::PrepareCompletes(
    std::span<PendingComplete> batch) {
  ExpireLate<bool>(batch, host_.prefix, "complete", host_.queue_timeout);
  CompleteUpdate update{.batch = batch};
  SplitById(batch, update.first, update.singles);
  // A claim the store does not remember needs its row read first.
  std::vector<Record> held;
  held.reserve(update.first.size());
  std::erase_if(update.first, [&](PendingComplete* call) {
    std::optional<Record> record =
        host_.claims.RecallRecord(call->id, call->token);
    if (!record) {
      update.singles.push_back(call);
      return true;
    }
    held.push_back(std::move(*record));
    return false;
  });
  const std::size_t n = update.first.size();
  if (n == 0) return update;
  update.ids.emplace(kByteaOid, n, RecordId::kSize);
  update.tokens.emplace(kByteaOid, n, Token::kSize);
  update.records.emplace(kByteaOid, n, 512);
  update.locked_until.emplace(kInt8Oid, n, 8);
  for (std::size_t i = 0; i < n; ++i) {
    update.ids->Add(update.first[i]->id.view());
    update.tokens->Add(update.first[i]->token.view());
    update.records->Add(EncodeCompleted(held[i], *update.first[i]->response));
    update.locked_until->Add(ToUnixNanos(held[i].locked_until));
  }
  update.params = {update.ids->view(), update.tokens->view(),
                   update.records->view(), update.locked_until->view()};
  return update;
}

void AsyncCalls::FinishCompletes(CompleteUpdate& update,
                                 std::optional<Result<PgResult>> updated) {
  if (updated) {
    if (!*updated) {
      for (PendingComplete& call : update.batch) {
        if (!Answered(call)) {
          Answer(call, Result<bool>(tl::unexpected(updated->error())));
        }
      }
      return;
    }
    const std::size_t n = update.first.size();
    std::vector<bool> stored(n, false);
    for (int row = 0; row < PQntuples((*updated)->get()); ++row) {
      const std::int64_t position = IntCell((*updated)->get(), row, 0);
      if (position >= 1 && static_cast<std::size_t>(position) <= n) {
        stored[static_cast<std::size_t>(position - 1)] = true;
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      host_.claims.Forget(update.first[i]->token);
      Answer(*update.first[i], Result<bool>(stored[i]));
    }
  }

  if (update.singles.empty()) return;
  Result<Connection*> c = FollowUps();
  if (!c) {
    for (PendingComplete* call : update.singles) {
      Answer(*call, Result<bool>(tl::unexpected(c.error())));
    }
    return;
  }
  for (PendingComplete* call : update.singles) {
    if ((*c)->broken()) return;  // Finish answers the rest.
    Result<bool> stored = CompleteOn(
        **c, host_.prefix, call->id, call->token, *call->response,
        host_.claims.RecallRecord(call->id, call->token), "complete");
    if (stored) host_.claims.Forget(call->token);
    Answer(*call, std::move(stored));
  }
}

}  // namespace idem::postgres_internal
