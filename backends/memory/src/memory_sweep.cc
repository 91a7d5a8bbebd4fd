// How the memory store finds and removes expired records: a claim that finds
// the store full sweeps a batch of buckets (ReclaimForClaim), PurgeExpired
// walks the table from where it stopped last (PurgeImpl); both remove the
// expired records of one bucket with one CAS (SweepBucket). Stats walks
// the table the same way, reading only.

#include <algorithm>
#include <limits>

#include "memory_hazard.h"
#include "memory_lock_free_store.h"

namespace idem::memory_internal {
namespace {

// Buckets examined by one reclaiming claim: bounds the latency a full store
// adds to a claim, while successive claims cover the whole table.
constexpr std::size_t kSweepBatch = 1024;

}  // namespace

void LockFreeStore::NoteNow(TimePoint now) {
  std::atomic<std::int64_t>& latest =
      stripes_[ThisThreadStripe()].latest_now_ns;
  const std::int64_t now_ns = ToUnixNanos(now);
  if (latest.load(std::memory_order_relaxed) < now_ns) {
    latest.store(now_ns, std::memory_order_relaxed);
  }
}

TimePoint LockFreeStore::LatestNow() const {
  std::int64_t latest = 0;
  for (const Stripe& s : stripes_) {
    latest = std::max(latest, s.latest_now_ns.load(std::memory_order_relaxed));
  }
  return FromUnixNanos(latest);
}

void LockFreeStore::BumpGeneration() {
  stripes_[ThisThreadStripe()].generation.fetch_add(1,
                                                    std::memory_order_acq_rel);
}

std::uint64_t LockFreeStore::GenerationSum() const {
  std::uint64_t sum = 0;
  for (const Stripe& s : stripes_) {
    sum += s.generation.load(std::memory_order_acquire);
  }
  return sum;
}

// Removes up to `limit` records of `bucket` that have expired at `now`.
LockFreeStore::SweepResult LockFreeStore::SweepBucket(
    std::atomic<Chain*>& bucket, TimePoint now, std::size_t limit) {
  hazard::Pointer hp;
  for (;;) {
    Chain* cur = hp.Protect(bucket);
    SweepResult result;
    std::size_t removed_bytes = 0;
    if (cur == nullptr) return result;
    // The first `limit` expired entries go; the rule is applied again when
    // building, on the same immutable chain, so both passes agree.
    auto removes = [&, taken = std::size_t{0}](const Entry& e) mutable {
      if (taken < limit && e.record.Expired(now)) {
        ++taken;
        return true;
      }
      return false;
    };
    auto first_pass = removes;
    for (std::size_t i = 0; i < cur->size(); ++i) {
      if (first_pass(cur->at(i))) {
        ++result.removed;
        removed_bytes += ChargedBytes(cur->at(i));
      } else {
        ++result.kept;
        result.min_kept_expiry =
            std::min(result.min_kept_expiry, cur->at(i).record.expires_at);
      }
    }
    if (result.removed == 0) return result;
    Chain* next = nullptr;
    if (result.kept > 0) {
      next = Chain::Make(result.kept);
      auto build_pass = removes;
      std::size_t k = 0;
      for (std::size_t i = 0; i < cur->size(); ++i) {
        if (!build_pass(cur->at(i))) {
          next->Emplace(k++, cur->at(i));
        }
      }
    }
    if (Publish(bucket, cur, next)) {
      slots_.Release(result.removed);
      bytes_.Release(removed_bytes);
      return result;
    }
  }
}

// Called by a claim (holding one hazard pointer). At most one claim sweeps at a
// time (others return at once rather than wait), which also lets the sweep keep
// its cycle bookkeeping in plain fields.
//
// The skip hint: a cycle is one pass over every bucket during which the
// generation sum did not change. If such a pass removed nothing, every
// record held had expires_at >= min_expiry: a record it did not see was
// published after its bucket was passed, and its publisher bumps its
// stripe's generation right after publishing, so the sum moves (before the
// pass ends, and the cycle proves nothing, or just after, and the hint is
// dropped at the next check). Removals need no bump: they cannot bring an
// earlier expiry. Until the sum moves or `now` reaches min_expiry no record
// can have expired, and sweeping again would be wasted work.
void LockFreeStore::ReclaimForClaim(TimePoint now) {
  bool expected = false;
  if (sweeping_.load(std::memory_order_relaxed) ||
      !sweeping_.compare_exchange_strong(expected, true,
                                         std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
    return;
  }
  struct Unlock {
    std::atomic<bool>& flag;
    ~Unlock() { flag.store(false, std::memory_order_release); }
  } unlock{sweeping_};

  SweepState& s = sweep_;
  const std::uint64_t generation = GenerationSum();
  if (s.hint_valid && generation == s.hint_gen && now < s.hint_until) {
    return;
  }
  s.hint_valid = false;
  if (s.buckets_examined > 0 && generation != s.generation) {
    s.buckets_examined = 0;
  }
  if (s.buckets_examined == 0) {
    s.generation = generation;
    s.min_expiry = TimePoint::max();
  }

  const std::size_t bucket_count = buckets_.size();
  const std::size_t batch = std::min(kSweepBatch, bucket_count);
  std::size_t removed = 0;
  for (std::size_t i = 0; i < batch; ++i) {
    const SweepResult r = SweepBucket(buckets_[s.next_bucket], now,
                                      std::numeric_limits<std::size_t>::max());
    s.next_bucket = (s.next_bucket + 1) & (bucket_count - 1);
    removed += r.removed;
    s.min_expiry = std::min(s.min_expiry, r.min_kept_expiry);
  }
  reclaim_sweeps_.fetch_add(1, std::memory_order_relaxed);
  swept_buckets_.fetch_add(batch, std::memory_order_relaxed);
  reclaimed_.fetch_add(removed, std::memory_order_relaxed);

  s.buckets_examined += batch;
  if (removed > 0) {
    s.buckets_examined = 0;  // Start a cycle that can prove something.
    return;
  }
  if (s.buckets_examined >= bucket_count) {
    s.buckets_examined = 0;
    if (GenerationSum() == s.generation) {
      s.hint_valid = true;
      s.hint_gen = s.generation;
      s.hint_until = s.min_expiry;
    }
  }
}

std::size_t LockFreeStore::PurgeImpl(TimePoint now, std::size_t limit) {
  // Once as many records were seen as were held at the start, the rest of
  // the table is (almost surely) empty: stop rather than walk it. Records
  // added meanwhile may be missed, as if they came after the call.
  const std::size_t held = size();
  if (limit == 0 || held == 0) return 0;
  const std::size_t bucket_count = buckets_.size();
  const std::size_t mask = bucket_count - 1;
  const std::size_t start = purge_next_bucket_.load(std::memory_order_relaxed);
  std::size_t removed = 0;
  std::size_t seen = 0;
  std::size_t examined = 0;
  for (; examined < bucket_count && removed < limit && seen < held;
       ++examined) {
    const SweepResult r =
        SweepBucket(buckets_[(start + examined) & mask], now, limit - removed);
    removed += r.removed;
    seen += r.removed + r.kept;
  }
  // Stopping on the limit may leave expired records in the last bucket
  // examined: start there next time.
  const std::size_t resume =
      removed >= limit && examined > 0 ? examined - 1 : examined;
  purge_next_bucket_.store((start + resume) & mask, std::memory_order_relaxed);
  purged_.fetch_add(removed, std::memory_order_relaxed);
  return removed;
}

// Every bucket once, each chain read under a hazard pointer: a count as of
// no single instant (records may come and go behind the walk), which is all
// an operator's tally needs. Stops early once as many records were seen as
// are held, as PurgeImpl does.
Result<std::optional<StoreStats>> LockFreeStore::DoStats(TimePoint now) {
  StoreStats stats;
  const std::size_t held = size();
  std::size_t seen = 0;
  hazard::Pointer hp;
  for (std::size_t i = 0; i < buckets_.size() && seen < held; ++i) {
    const Chain* chain = hp.Protect(buckets_[i]);
    if (chain == nullptr) continue;
    for (std::size_t j = 0; j < chain->size(); ++j) {
      const Record& record = chain->at(j).record;
      stats.Count(record.state, record.expires_at, now);
    }
    seen += chain->size();
  }
  return std::optional<StoreStats>(stats);
}

}  // namespace idem::memory_internal
