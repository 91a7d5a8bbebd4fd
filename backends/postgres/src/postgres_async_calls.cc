// See postgres_async_calls.h.

#include "postgres_async_calls.h"

#include <libpq-fe.h>

#include <algorithm>
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

}  // namespace

AsyncCalls::AsyncCalls(AsyncCallsHost host)
    : host_(std::move(host)), thread_([this] { Flush(); }) {}

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
}

void AsyncCalls::Flush() {
  if (claims_.empty() && completes_.empty()) return;
  std::vector<PendingClaim> claims;
  std::vector<PendingComplete> completes;
  claims.swap(claims_);
  completes.swap(completes_);

  // What every call not answered below gets: a queue left too late, no
  // connection, a connection that broke, an exception.
  std::optional<Error> failure;
  const Status sent = CatchExceptions(
      [&] { return host_.prefix + "asynchronous calls"; },
      [&]() -> Status {
        // A batch of calls that all waited too long needs no connection.
        ExpireLate<ClaimResult>(std::span(claims), host_.prefix, "claim",
                                host_.queue_timeout);
        ExpireLate<bool>(std::span(completes), host_.prefix, "complete",
                         host_.queue_timeout);
        if (std::all_of(claims.begin(), claims.end(), Answered<PendingClaim>) &&
            std::all_of(completes.begin(), completes.end(),
                        Answered<PendingComplete>)) {
          return {};
        }
        IDEM_ASSIGN_OR_RETURN(Pool::Lease lease, host_.acquire());
        Connection& c = *lease;
        for (std::size_t i = 0; i < claims.size() && !c.broken();
             i += kMaxBatch) {
          ClaimBatch(c, std::span(claims).subspan(
                            i, std::min(kMaxBatch, claims.size() - i)));
        }
        for (std::size_t i = 0; i < completes.size() && !c.broken();
             i += kMaxBatch) {
          CompleteBatch(c, std::span(completes).subspan(
                               i, std::min(kMaxBatch, completes.size() - i)));
        }
        if (c.broken()) {
          return MakeError(ErrorCode::kUnavailable,
                           host_.prefix +
                               "connection failed earlier in the same batch "
                               "of asynchronous calls; not sent");
        }
        return {};
      });
  if (!sent) failure = sent.error();
  for (PendingClaim& call : claims) {
    if (Answered(call)) continue;
    Answer(call,
           Result<ClaimResult>(tl::unexpected(failure.value_or(Error(
               ErrorCode::kInternal, host_.prefix + "claim: not sent")))));
  }
  for (PendingComplete& call : completes) {
    if (Answered(call)) continue;
    Answer(call,
           Result<bool>(tl::unexpected(failure.value_or(Error(
               ErrorCode::kInternal, host_.prefix + "complete: not sent")))));
  }
}

void AsyncCalls::ClaimBatch(Connection& c, std::span<PendingClaim> batch) {
  ExpireLate<ClaimResult>(batch, host_.prefix, "claim", host_.queue_timeout);
  // The calls by id; each id's first call leads its group into the INSERT,
  // and the others of the group are decided after it, as if they came
  // just after it (a retry storm on one key is one row read, not a round
  // trip per call).
  const std::vector<PendingClaim*> sorted = SortedById(batch);
  if (sorted.empty()) return;
  std::vector<std::size_t> starts;  // Of each group in `sorted`, then its end.
  std::vector<PendingClaim*> leaders;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i == 0 || sorted[i]->id != sorted[i - 1]->id) {
      starts.push_back(i);
      leaders.push_back(sorted[i]);
    }
  }
  starts.push_back(sorted.size());
  auto group = [&](std::size_t g) {
    return std::span(sorted).subspan(starts[g], starts[g + 1] - starts[g]);
  };
  auto fail_all = [&](const Error& error) {
    for (PendingClaim& call : batch) {
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

  // 1. One INSERT for every distinct id.
  const std::size_t n = leaders.size();
  BinaryArray ids(kByteaOid, n, RecordId::kSize);
  BinaryArray fingerprints(kByteaOid, n, Fingerprint::kSize);
  BinaryArray tokens(kByteaOid, n, Token::kSize);
  BinaryArray locked_until(kInt8Oid, n, 8);
  BinaryArray expires_at(kInt8Oid, n, 8);
  BinaryArray records(kByteaOid, n, 128);
  for (const PendingClaim* call : leaders) {
    const Record& fresh = call->fresh;
    ids.Add(call->id.view());
    fingerprints.Add(fresh.fingerprint.view());
    tokens.Add(fresh.token.view());
    locked_until.Add(ToUnixNanos(fresh.locked_until));
    expires_at.Add(ToUnixNanos(fresh.expires_at));
    records.Add(EncodeRecord(fresh));
  }
  Result<PgResult> inserted =
      c.Run(kInsertBatch,
            {ids.view(), fingerprints.view(), tokens.view(),
             locked_until.view(), expires_at.view(), records.view()},
            "claim");
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
    Result<PgResult> rows = c.Run(kSelectBatch, {blocked_ids.view()}, "claim");
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
  for (PendingClaim* call : again) {
    if (c.broken()) return;  // Flush answers the rest.
    Result<ClaimResult> result = ClaimOn(c, host_.prefix, call->id, call->fresh,
                                         call->now, host_.claim_hook);
    if (result && result->outcome == ClaimOutcome::kAcquired) {
      host_.claims.Remember(call->fresh.token,
                            {call->id, call->fresh.fingerprint,
                             call->fresh.locked_until, call->fresh.expires_at});
    }
    Answer(*call, std::move(result));
  }
}

void AsyncCalls::CompleteBatch(Connection& c,
                               std::span<PendingComplete> batch) {
  ExpireLate<bool>(batch, host_.prefix, "complete", host_.queue_timeout);
  std::vector<PendingComplete*> first;
  std::vector<PendingComplete*> singles;
  SplitById(batch, first, singles);
  // A claim the store does not remember needs its row read first.
  std::vector<Record> held;
  held.reserve(first.size());
  std::erase_if(first, [&](PendingComplete* call) {
    std::optional<Record> record =
        host_.claims.RecallRecord(call->id, call->token);
    if (!record) {
      singles.push_back(call);
      return true;
    }
    held.push_back(std::move(*record));
    return false;
  });

  if (!first.empty()) {
    const std::size_t n = first.size();
    BinaryArray ids(kByteaOid, n, RecordId::kSize);
    BinaryArray tokens(kByteaOid, n, Token::kSize);
    BinaryArray records(kByteaOid, n, 512);
    BinaryArray locked_until(kInt8Oid, n, 8);
    for (std::size_t i = 0; i < n; ++i) {
      ids.Add(first[i]->id.view());
      tokens.Add(first[i]->token.view());
      records.Add(EncodeCompleted(held[i], *first[i]->response));
      locked_until.Add(ToUnixNanos(held[i].locked_until));
    }
    Result<PgResult> updated =
        c.Run(kCompleteBatch,
              {ids.view(), tokens.view(), records.view(), locked_until.view()},
              "complete");
    if (!updated) {
      for (PendingComplete& call : batch) {
        if (!Answered(call)) {
          Answer(call, Result<bool>(tl::unexpected(updated.error())));
        }
      }
      return;
    }
    std::vector<bool> stored(n, false);
    for (int row = 0; row < PQntuples(updated->get()); ++row) {
      const std::int64_t position = IntCell(updated->get(), row, 0);
      if (position >= 1 && static_cast<std::size_t>(position) <= n) {
        stored[static_cast<std::size_t>(position - 1)] = true;
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      host_.claims.Forget(first[i]->token);
      Answer(*first[i], Result<bool>(stored[i]));
    }
  }

  for (PendingComplete* call : singles) {
    if (c.broken()) return;  // Flush answers the rest.
    Result<bool> stored = CompleteOn(
        c, host_.prefix, call->id, call->token, *call->response,
        host_.claims.RecallRecord(call->id, call->token), "complete");
    if (stored) host_.claims.Forget(call->token);
    Answer(*call, std::move(stored));
  }
}

}  // namespace idem::postgres_internal
