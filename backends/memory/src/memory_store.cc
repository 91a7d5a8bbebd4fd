// The lock-free in-memory store; see memory_store.h for its contract.
//
// Layout: a fixed array of buckets (a power of two >= capacity, so chains
// are short; memory_bucket_table.h). A bucket points to an immutable Chain
// (memory_chain.h): a small array of {id, record} entries, records inline.
// Every change builds a new chain, publishes it with one CAS on the bucket, and
// on success retires the old chain to the hazard-pointer scheme
// (memory_hazard.h). Readers protect the chain they load with a
// hazard::Pointer, so it stays valid until they return.
//
// Capacity and bytes are two StripedBudgets (memory_striped_budget.h): a claim
// reserves a slot and kRecordBytes before publishing a new record, a
// Complete ResponseBytes before its CAS; whoever unlinks a record gives back
// what it was charged, after the CAS that unlinked it.
//
// Why a byte bound as well as `capacity`: capacity alone lets large responses
// take any amount of memory (1 M records of 1 MiB bodies: a terabyte).
//
// Expired records are reclaimed by claims that find the store full and by
// PurgeExpired (memory_sweep.cc).

#include "idem/memory_store.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include "idem/token.h"
#include "memory_hazard.h"
#include "memory_lock_free_store.h"
#include "memory_record_memory.h"

namespace idem {
namespace {

using memory_internal::Chain;
using memory_internal::Entry;
using memory_internal::kStripes;
using memory_internal::LockFreeStore;
using memory_internal::StoredResponse;

constexpr std::size_t kMinBuckets = 16;
// How often a claim that found no free slot looks at its bucket and the
// count again before reporting the store full.
constexpr int kFullAttempts = 3;

// Most credits a stripe keeps. Larger batches touch the shared count less
// often but park more of the capacity in stripes, where other threads find
// it only after a scan. Bytes: at most 2 x 64 KiB parked per stripe, 2 MiB
// in all.
constexpr std::size_t kMaxSlotBatch = 64;
constexpr std::size_t kMaxByteBatch = std::size_t{64} << 10;

// A small store keeps its capacity in the shared count, so that a scan for
// parked credits is rare.
std::size_t BatchFor(std::size_t limit, std::size_t max_batch) {
  return std::clamp<std::size_t>(limit / (4 * kStripes), 1, max_batch);
}

}  // namespace

std::size_t MemoryStore::ResponseBytes(const Response& response) {
  std::size_t n = kResponseBytes + response.body.size();
  for (const Header& header : response.headers) {
    n += kHeaderBytes + header.first.size() + header.second.size();
  }
  return n;
}

Result<std::unique_ptr<MemoryStore>> MemoryStore::Open(
    const MemoryStoreOptions& options) {
  if (options.capacity == 0 || options.capacity > kMaxCapacity) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "memory store: capacity must be between 1 and " +
                         std::to_string(kMaxCapacity) + " (got " +
                         std::to_string(options.capacity) + ")");
  }
  if (options.max_bytes < kMinMaxBytes || options.max_bytes > kMaxMaxBytes) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "memory store: max_bytes must be between " +
                         std::to_string(kMinMaxBytes) + " and " +
                         std::to_string(kMaxMaxBytes) + " (got " +
                         std::to_string(options.max_bytes) + ")");
  }
  const std::size_t buckets =
      std::max(kMinBuckets, std::bit_ceil(options.capacity));
  try {
    return std::unique_ptr<MemoryStore>(new LockFreeStore(options, buckets));
  } catch (const std::bad_alloc&) {
    return MakeError(ErrorCode::kResourceExhausted,
                     "memory store: cannot allocate an index for capacity " +
                         std::to_string(options.capacity));
  }
}

namespace memory_internal {

LockFreeStore::LockFreeStore(const MemoryStoreOptions& options,
                             std::size_t bucket_count)
    : buckets_(bucket_count),
      slots_(options.capacity, BatchFor(options.capacity, kMaxSlotBatch)),
      bytes_(options.max_bytes, BatchFor(options.max_bytes, kMaxByteBatch)) {
  // The charges estimate the memory a record occupies (memory_store.h): they
  // cover at least its entry (with a share of its chain's header), the
  // stored response's block header (memory_stored_response.h) and, for each
  // header, the sizes of its name and value.
  static_assert(sizeof(Entry) + 16 <= kRecordBytes);
  static_assert(sizeof(Response) + 32 <= kResponseBytes);
  static_assert(sizeof(Header) <= kHeaderBytes);
}

LockFreeStore::~LockFreeStore() {
  // No concurrent callers (documented), so everything still linked is ours
  // alone and the count is exact: stop once every record is freed. Retired
  // objects belong to the hazard scheme and never point back into the store.
  std::size_t left = size();
  for (std::size_t i = 0; i < buckets_.size() && left > 0; ++i) {
    Chain* chain = buckets_[i].load(std::memory_order_acquire);
    if (chain == nullptr) continue;
    left -= std::min(left, chain->size());
    Chain::Free(chain);
  }
}

std::size_t LockFreeStore::ChargedBytes(const Entry& entry) {
  return kRecordBytes + entry.response.charge();
}

Error LockFreeStore::Full() const {
  return Error(ErrorCode::kResourceExhausted,
               "memory store full: " + std::to_string(size()) +
                   " live records (capacity " + std::to_string(capacity()) +
                   "), " + std::to_string(bytes()) + " bytes (max_bytes " +
                   std::to_string(max_bytes()) + ")");
}

MemoryStoreStats LockFreeStore::stats() const {
  MemoryStoreStats s;
  s.records = size();
  s.capacity = capacity();
  s.buckets = buckets_.size();
  s.bytes = bytes();
  s.max_bytes = max_bytes();
  const memory_internal::RecordMemory::Usage pool =
      memory_internal::RecordMemory::InUse();
  s.pool_bytes_in_use = pool.bytes;
  s.pool_bytes_reserved = pool.reserved_bytes;
  s.reclaim_sweeps = reclaim_sweeps_.load(std::memory_order_relaxed);
  s.swept_buckets = swept_buckets_.load(std::memory_order_relaxed);
  s.reclaimed = reclaimed_.load(std::memory_order_relaxed);
  s.purged = purged_.load(std::memory_order_relaxed);
  return s;
}

StoreInfo LockFreeStore::Info() const {
  return StoreInfo{.name = "memory",
                   .durable = false,
                   .shared_across_processes = false,
                   .calls_may_block = false};
}

Result<ClaimResult> LockFreeStore::DoClaim(const RecordId& id,
                                           const Fingerprint& fp, TimePoint now,
                                           Duration ttl,
                                           Duration lock_timeout) {
  return ClaimImpl(id, fp, now, ttl, lock_timeout);
}

Result<ClaimResult> LockFreeStore::ClaimImpl(const RecordId& id,
                                             const Fingerprint& fp,
                                             TimePoint now, Duration ttl,
                                             Duration lock_timeout) {
  std::atomic<Chain*>& bucket = buckets_.For(id);
  // The bucket is usually a cache (and TLB) miss, the largest single cost of
  // a claim on a big table: start loading it, and build the record a claim
  // would insert meanwhile. Fresh claims (which keep that record) are the
  // common case; a replay throws it away.
  __builtin_prefetch(&bucket);
  const Record fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
  NoteNow(now);
  hazard::Pointer hp;
  int full_attempts = 0;
  for (;;) {
    Chain* cur = hp.Protect(bucket);
    const std::size_t index = cur == nullptr ? 0 : cur->Find(id);
    const Entry* old_entry =
        cur != nullptr && index < cur->size() ? &cur->at(index) : nullptr;
    const Record* old = old_entry != nullptr ? &old_entry->record : nullptr;
    if (old != nullptr) {
      if (auto blocked = ClaimBlockedBy(*old, fp, now)) {
        // A replay gets its own copy of the response (`old_entry` is
        // protected by `hp` until this returns).
        if (blocked->outcome == ClaimOutcome::kCompleted) {
          blocked->response = old_entry->response.ToResponse();
        }
        return *blocked;
      }
    }
    // Absent, expired, or in progress with its lock timed out (a takeover):
    // a fresh record goes in below.
    const bool live = old != nullptr && !old->Expired(now);
    Chain* next = old != nullptr
                      ? Chain::WithReplaced(cur, index, fresh, StoredResponse())
                      : Chain::WithAdded(cur, id, fresh);
    // A new id needs a slot. It is reserved right before the CAS so that
    // claims racing on the same new id hold extra slots only for an instant.
    const bool needs_slot = old == nullptr;
    bool reserved = needs_slot && slots_.TryReserve(1);
    if (reserved && !bytes_.TryReserve(kRecordBytes)) {
      slots_.Release(1);
      reserved = false;
    }
    if (needs_slot && !reserved) {
      Chain::Free(next);
      if (full_attempts == 0) ReclaimForClaim(now);
      // Look again a couple of times: a racing claim may have just inserted
      // this id (the answer is then its outcome, not "full"), or given back
      // a slot it held for an instant. Bounded, so the call never waits.
      if (++full_attempts < kFullAttempts) continue;
      return tl::unexpected(Full());
    }
    if (!Publish(bucket, cur, next)) {
      if (needs_slot) {
        slots_.Release(1);
        bytes_.Release(kRecordBytes);
      }
      continue;
    }
    ClaimResult result = ClaimAcquired(fresh, live);
    // An expired completed record replaced: its response goes with it (its
    // kRecordBytes stay, for the fresh record in its slot). `old` lives in
    // the retired `cur`, which `hp` still protects.
    if (old_entry != nullptr && old_entry->response) {
      bytes_.Release(old_entry->response.charge());
    }
    BumpGeneration();  // A new expiry is published: see ReclaimForClaim.
    return result;
  }
}

Result<bool> LockFreeStore::DoComplete(const RecordId& id, const Token& token,
                                       const Response& response) {
  return CompleteImpl(id, token, response);
}

Result<bool> LockFreeStore::DoCompleteShared(
    const RecordId& id, const Token& token,
    std::shared_ptr<const Response> response) {
  if (response == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "memory store: CompleteShared without a response");
  }
  // Copied into the store's own memory all the same (memory_stored_response.h).
  return CompleteImpl(id, token, *response);
}

template <typename ChangeFn>
Result<bool> LockFreeStore::ChangeRecord(const RecordId& id, ChangeFn change) {
  hazard::Pointer hp;
  std::atomic<Chain*>& bucket = buckets_.For(id);
  for (;;) {
    Chain* cur = hp.Protect(bucket);
    if (cur == nullptr) return false;
    const std::size_t index = cur->Find(id);
    if (index == cur->size()) return false;
    // `cur`, and the record in it, stay alive while `hp` protects it.
    Change step = change(cur, index, cur->at(index));
    if (!step.publish) {
      if (step.again) continue;
      return step.stop;
    }
    if (Publish(bucket, cur, step.next)) return true;
  }
}

// The copy of `response` in the store's memory is made only once the record
// is known to be completable. Its bytes are charged once, before the first
// CAS, and given back unless a CAS publishes it.
Result<bool> LockFreeStore::CompleteImpl(const RecordId& id, const Token& token,
                                         const Response& response) {
  struct Charge {
    StripedBudget& budget;
    std::size_t bytes = 0;
    ~Charge() { budget.Release(bytes); }
  } charge{bytes_};
  StoredResponse stored;
  int full_attempts = 0;
  const Result<bool> completed = ChangeRecord(
      id, [&](const Chain* cur, std::size_t index, const Entry& entry) {
        const Record& old = entry.record;
        if (!old.HeldBy(token)) return Change{};
        if (charge.bytes == 0) {
          const std::size_t need = ResponseBytes(response);
          if (!bytes_.TryReserve(need)) {
            // As a claim does: reclaim expired records (by the latest time
            // a claim saw; Complete has none of its own), look again, then
            // fail leaving the record in progress.
            if (full_attempts == 0) ReclaimForClaim(LatestNow());
            if (++full_attempts < kFullAttempts) return Change{.again = true};
            return Change{.stop = tl::unexpected(Full())};
          }
          charge.bytes = need;
        }
        if (!stored) stored = StoredResponse::Make(response, charge.bytes);
        Record done = old;
        done.state = RecordState::kCompleted;
        return Change{.publish = true,
                      .next = Chain::WithReplaced(cur, index, done, stored)};
      });
  // Published: the bytes are now the record's, given back when it goes.
  if (completed.value_or(false)) charge.bytes = 0;
  return completed;
}

template <typename Pred>
bool LockFreeStore::RemoveIf(const RecordId& id, Pred removes) {
  std::size_t charged = 0;
  const Result<bool> removed = ChangeRecord(
      id, [&](const Chain* cur, std::size_t index, const Entry& old) {
        if (!removes(old.record)) return Change{};
        charged = ChargedBytes(old);
        return Change{.publish = true, .next = Chain::WithRemoved(cur, index)};
      });
  if (!removed.value_or(false)) return false;
  slots_.Release(1);
  bytes_.Release(charged);
  return true;
}

Result<bool> LockFreeStore::DoRelease(const RecordId& id, const Token& token) {
  return RemoveIf(id, [&](const Record& r) { return r.HeldBy(token); });
}

Result<bool> LockFreeStore::DoRevoke(const RecordId& id) {
  return RemoveIf(id, [](const Record&) { return true; });
}

// One CAS, like Complete: the record's copy with its new locked_until
// replaces it in a new chain. Its charge does not change (no response).
Result<bool> LockFreeStore::DoExtendLock(const RecordId& id, const Token& token,
                                         TimePoint now, Duration lock_timeout) {
  return ChangeRecord(
      id, [&](const Chain* cur, std::size_t index, const Entry& old) {
        const std::optional<TimePoint> until =
            RenewedLockUntil(old.record, token, now, lock_timeout);
        if (!until) return Change{};
        Record renewed = old.record;
        renewed.locked_until = *until;
        return Change{
            .publish = true,
            .next = Chain::WithReplaced(cur, index, renewed, old.response)};
      });
}

Result<std::optional<Record>> LockFreeStore::DoInspect(const RecordId& id,
                                                       TimePoint now) {
  hazard::Pointer hp;
  const Chain* cur = hp.Protect(buckets_.For(id));
  if (cur == nullptr) return std::nullopt;
  const std::size_t index = cur->Find(id);
  if (index == cur->size()) return std::nullopt;
  const Entry& entry = cur->at(index);
  if (entry.record.Expired(now)) return std::nullopt;
  Record record = entry.record;
  record.response = entry.response.ToResponse();
  return record;
}

Result<std::size_t> LockFreeStore::DoPurgeExpired(TimePoint now,
                                                  std::size_t limit) {
  return PurgeImpl(now, limit);
}

}  // namespace memory_internal
}  // namespace idem
