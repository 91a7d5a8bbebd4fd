// LocalCacheStore (idem/store/local_cache.h): which calls the cache answers,
// which it fills from, and which clear it. The table is local_cache_table.h.

#include "idem/store/local_cache.h"

#include <algorithm>
#include <string>
#include <utility>

#include "local_cache_table.h"

namespace idem {
namespace {

constexpr std::size_t kMaxRecords = std::size_t{1} << 24;
constexpr std::size_t kMaxMegabytes = 65536;
constexpr std::chrono::seconds kMaxTtl{3600};

TimePoint AddSaturated(TimePoint t, Duration d) {
  if (t.time_since_epoch() > Duration::max() - d) return TimePoint::max();
  return t + d;
}

bool HasParam(const StoreUri& uri, std::string_view name) {
  return std::any_of(uri.params().begin(), uri.params().end(),
                     [&](const auto& p) { return p.first == name; });
}

}  // namespace

Status ReadLocalCacheOptions(StoreUri& uri, LocalCacheOptions& out) {
  const bool tuned =
      HasParam(uri, "local_cache_ttl_s") || HasParam(uri, "local_cache_mb");
  IDEM_RETURN_IF_ERROR(
      uri.ReadUint("local_cache", out.max_records, 0, kMaxRecords));
  IDEM_RETURN_IF_ERROR(uri.ReadDuration("local_cache_ttl_s", out.ttl,
                                        std::chrono::seconds(1), kMaxTtl));
  std::size_t megabytes = std::max<std::size_t>(out.max_bytes >> 20, 1);
  IDEM_RETURN_IF_ERROR(
      uri.ReadUint("local_cache_mb", megabytes, 1, kMaxMegabytes));
  out.max_bytes = megabytes << 20;
  if (tuned && out.max_records == 0) {
    return tl::unexpected(
        uri.InvalidArgument("local_cache_ttl_s and local_cache_mb need "
                            "local_cache > 0 (the cache is off)"));
  }
  return {};
}

Result<std::unique_ptr<Store>> LocalCacheStore::Wrap(
    std::unique_ptr<Store> inner, LocalCacheOptions options) {
  if (options.max_records == 0) return inner;
  if (options.ttl <= Duration::zero() || options.max_bytes == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "local cache: ttl must be positive and max_bytes not 0");
  }
  if (options.clock == nullptr) options.clock = std::make_shared<SystemClock>();
  return std::unique_ptr<Store>(
      new LocalCacheStore(std::move(inner), std::move(options)));
}

LocalCacheStore::LocalCacheStore(std::unique_ptr<Store> inner,
                                 LocalCacheOptions options)
    : StoreBoundary("local cache of the " + inner->Info().name + " store"),
      inner_(std::move(inner)),
      options_(std::move(options)),
      table_(std::make_unique<Table>(options_.max_records, options_.max_bytes,
                                     options_.metrics.get())) {}

LocalCacheStore::~LocalCacheStore() {
  // First: the inner store answers its asynchronous calls in flight before
  // its destructor returns, and their callbacks use the table and the memo.
  inner_.reset();
}

LocalCacheCounters LocalCacheStore::counters() const {
  return table_->counters();
}

std::size_t LocalCacheStore::size() const { return table_->size(); }

Result<ClaimResult> LocalCacheStore::DoClaim(const RecordId& id,
                                             const Fingerprint& fp,
                                             TimePoint now, Duration ttl,
                                             Duration lock_timeout) {
  // Read before the store is, so that an entry filled from this claim is
  // fresh for at most ttl after the store answered.
  const TimePoint clock_now = options_.clock->Now();
  Table::Lookup found = table_->Find(id, fp, now, clock_now);
  if (found.answer) return std::move(*found.answer);
  IDEM_ASSIGN_OR_RETURN(ClaimResult claim,
                        inner_->Claim(id, fp, now, ttl, lock_timeout));
  if (claim.outcome == ClaimOutcome::kAcquired) {
    // The store holds a new record: whatever this process cached or is
    // filling for the id is older.
    table_->Invalidate(id);
    // The record's expiry, as NewClaimRecord (which every store claims
    // with) sets it: its completion is cached without a read.
    claims_.Remember(claim.token, {.id = id,
                                   .fingerprint = fp,
                                   .locked_until = claim.locked_until,
                                   .expires_at = AddSaturated(now, ttl)});
  } else if (claim.outcome == ClaimOutcome::kCompleted &&
             !KeepReplayed(id, fp, claim, clock_now, found.epoch)) {
    // A store that does not say when the record expires: read it. A failed
    // read only leaves the record uncached.
    auto record = inner_->Inspect(id, now);
    if (record && record->has_value()) {
      Record& r = **record;
      if (r.state == RecordState::kCompleted && r.fingerprint == fp &&
          !r.Expired(now) && r.response != nullptr) {
        Keep(id, std::move(r), AddSaturated(clock_now, options_.ttl),
             found.epoch);
      }
    }
  }
  return claim;
}

bool LocalCacheStore::KeepReplayed(const RecordId& id, const Fingerprint& fp,
                                   const ClaimResult& claim,
                                   TimePoint clock_now, std::uint64_t epoch) {
  if (claim.expires_at == TimePoint{} || claim.response == nullptr) {
    return false;
  }
  Keep(id,
       Record{.state = RecordState::kCompleted,
              .fingerprint = fp,
              .expires_at = claim.expires_at,
              .response = claim.response},
       AddSaturated(clock_now, options_.ttl), epoch);
  return true;
}

void LocalCacheStore::KeepCompleted(const RecordId& id, const Token& token,
                                    const ClaimFields& fields,
                                    std::shared_ptr<const Response> response,
                                    TimePoint clock_now, std::uint64_t epoch) {
  Keep(id,
       Record{.state = RecordState::kCompleted,
              .fingerprint = fields.fingerprint,
              .token = token,
              .locked_until = fields.locked_until,
              .expires_at = fields.expires_at,
              .response = std::move(response)},
       AddSaturated(clock_now, options_.ttl), epoch);
}

void LocalCacheStore::DoClaimAsync(const RecordId& id, const Fingerprint& fp,
                                   TimePoint now, Duration ttl,
                                   Duration lock_timeout,
                                   StoreCallback<ClaimResult> done) {
  // As DoClaim: read before the store is.
  const TimePoint clock_now = options_.clock->Now();
  Table::Lookup found = table_->Find(id, fp, now, clock_now);
  if (found.answer) {
    done(std::move(*found.answer));
    return;
  }
  inner_->ClaimAsync(
      id, fp, now, ttl, lock_timeout,
      [this, id, fp, now, ttl, clock_now, epoch = found.epoch,
       done = std::move(done)](Result<ClaimResult> claim) {
        if (claim && claim->outcome == ClaimOutcome::kAcquired) {
          // As DoClaim: the store holds a new record.
          table_->Invalidate(id);
          claims_.Remember(claim->token,
                           {.id = id,
                            .fingerprint = fp,
                            .locked_until = claim->locked_until,
                            .expires_at = AddSaturated(now, ttl)});
        } else if (claim && claim->outcome == ClaimOutcome::kCompleted) {
          // Without its expiry it stays uncached: reading the record back
          // would block the store's thread.
          KeepReplayed(id, fp, *claim, clock_now, epoch);
        }
        done(std::move(claim));
      });
}

void LocalCacheStore::DoCompleteAsync(const RecordId& id, const Token& token,
                                      std::shared_ptr<const Response> response,
                                      StoreCallback<bool> done) {
  std::optional<ClaimFields> fields = claims_.Take(token);
  if (!fields || fields->id != id || response == nullptr) {
    inner_->CompleteAsync(id, token, std::move(response), std::move(done));
    return;
  }
  // As DoCompleteShared: an invalidation after this point drops the fill.
  const std::uint64_t epoch = table_->Epoch(id);
  const TimePoint clock_now = options_.clock->Now();
  inner_->CompleteAsync(
      id, token, response,
      [this, id, token, fields = *fields, response, epoch, clock_now,
       done = std::move(done)](Result<bool> completed) {
        if (completed && *completed) {
          KeepCompleted(id, token, fields, response, clock_now, epoch);
        }
        done(std::move(completed));
      });
}

std::optional<Result<ClaimResult>> LocalCacheStore::DoTryClaimWithoutBlocking(
    const RecordId& id, const Fingerprint& fp, TimePoint now, Duration ttl,
    Duration lock_timeout) {
  (void)ttl, (void)lock_timeout;
  Table::Lookup found =
      table_->Find(id, fp, now, options_.clock->Now(), /*count_miss=*/false);
  if (!found.answer) return std::nullopt;
  return Result<ClaimResult>(std::move(*found.answer));
}

Result<bool> LocalCacheStore::DoComplete(const RecordId& id, const Token& token,
                                         const Response& response) {
  std::optional<ClaimFields> fields = claims_.Take(token);
  if (!fields || fields->id != id) return inner_->Complete(id, token, response);
  const std::uint64_t epoch = table_->Epoch(id);
  const TimePoint clock_now = options_.clock->Now();
  IDEM_ASSIGN_OR_RETURN(bool completed, inner_->Complete(id, token, response));
  if (completed) {
    std::shared_ptr<const Response> copy;
    try {
      copy = std::make_shared<const Response>(response);
    } catch (...) {
      return completed;  // No memory for the copy: stored, not cached.
    }
    KeepCompleted(id, token, *fields, std::move(copy), clock_now, epoch);
  }
  return completed;
}

Result<bool> LocalCacheStore::DoCompleteShared(
    const RecordId& id, const Token& token,
    std::shared_ptr<const Response> response) {
  std::optional<ClaimFields> fields = claims_.Take(token);
  if (!fields || fields->id != id || response == nullptr) {
    return inner_->CompleteShared(id, token, std::move(response));
  }
  // Taken before the store completes: an invalidation after this point
  // (a revoke racing the completion) drops the fill.
  const std::uint64_t epoch = table_->Epoch(id);
  const TimePoint clock_now = options_.clock->Now();
  IDEM_ASSIGN_OR_RETURN(bool completed,
                        inner_->CompleteShared(id, token, response));
  if (completed) {
    KeepCompleted(id, token, *fields, std::move(response), clock_now, epoch);
  }
  return completed;
}

void LocalCacheStore::Keep(const RecordId& id, Record record,
                           TimePoint fresh_until,
                           std::uint64_t epoch) noexcept {
  // Best effort: the store has answered, and a failure to cache (no
  // memory) must not turn its answer into an error.
  try {
    table_->Insert(id, std::move(record), fresh_until, epoch);
  } catch (...) {
  }
}

Result<bool> LocalCacheStore::DoRelease(const RecordId& id,
                                        const Token& token) {
  claims_.Forget(token);
  return inner_->Release(id, token);
}

Result<bool> LocalCacheStore::DoRevoke(const RecordId& id) {
  // Before: no claim replays the record while the revoke is under way.
  // After: a fill that read the store before the revoke deleted the
  // record is dropped or cleared, so nothing replays it once this returns.
  table_->Invalidate(id);
  auto revoked = inner_->Revoke(id);
  table_->Invalidate(id);
  return revoked;
}

Result<bool> LocalCacheStore::DoExtendLock(const RecordId& id,
                                           const Token& token, TimePoint now,
                                           Duration lock_timeout) {
  return inner_->ExtendLock(id, token, now, lock_timeout);
}

Result<std::optional<StoreStats>> LocalCacheStore::DoStats(TimePoint now) {
  return inner_->Stats(now);
}

Result<std::optional<Record>> LocalCacheStore::DoInspect(const RecordId& id,
                                                         TimePoint now) {
  return inner_->Inspect(id, now);
}

Result<std::size_t> LocalCacheStore::DoPurgeExpired(TimePoint now,
                                                    std::size_t limit) {
  // First: an entry whose record the purge may delete is answered no more.
  table_->Purged(now);
  return inner_->PurgeExpired(now, limit);
}

Result<std::unique_ptr<Store>> OpenWithLocalCache(
    StoreUri& uri, const StoreOptions& options,
    Result<std::unique_ptr<Store>> (*open)(StoreUri&, const StoreOptions&)) {
  LocalCacheOptions cache;
  cache.clock = options.clock;
  cache.metrics = options.metrics;
  IDEM_RETURN_IF_ERROR(ReadLocalCacheOptions(uri, cache));
  IDEM_ASSIGN_OR_RETURN(auto store, open(uri, options));
  return LocalCacheStore::Wrap(std::move(store), std::move(cache));
}

}  // namespace idem
