// The lock-free in-memory store; see memory_store.h for its contract.
//
// Layout: a fixed array of buckets (a power of two >= capacity, so chains
// are short). A bucket points to an immutable Chain: a small array of
// {id, record} entries, records inline. Every change builds a new chain,
// publishes it with one CAS on the bucket, and on success retires the old
// chain to the hazard-pointer scheme (hazard.h). Readers protect the chain
// they load with a hazard::Pointer, so it stays valid until they return.
//
// Capacity is counted in slots (see reserved_ and the stripes): a claim
// reserves a slot before publishing a new record, a removal frees it after
// its CAS. Bytes are counted the same way (bytes_reserved_ and the stripes'
// byte credits): a claim reserves kRecordBytes with its slot, a Complete
// ResponseBytes before its CAS; whoever unlinks a record gives back what it
// was charged, after the CAS that unlinked it.

#include "idem/memory_store.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <utility>

#include <sys/mman.h>

#include "hazard.h"
#include "idem/token.h"

// ASAN_POISON_MEMORY_REGION is a no-op unless built with AddressSanitizer,
// which then reports any use of a cached block as a use-after-free.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

namespace idem {
namespace {

constexpr std::size_t kMinBuckets = 16;
// Buckets examined by one reclaiming claim: bounds the latency a full store
// adds to a claim, while successive claims cover the whole table.
constexpr std::size_t kSweepBatch = 1024;
// How often a claim that found no free slot looks at its bucket and the
// count again before reporting the store full.
constexpr int kFullAttempts = 3;

// Most credits a stripe takes from the shared count at once. Larger batches
// touch the shared line less often but park more of the capacity in
// stripes, where other threads find it only after a scan.
constexpr std::size_t kMaxCreditBatch = 64;
// The same for bytes: at most 2 x 64 KiB parked per stripe, 2 MiB in all.
constexpr std::size_t kMaxByteBatch = std::size_t{64} << 10;

// Threads are spread over the stripes in the order they first use a store
// (round robin, shared by all stores), so up to kStripes threads never share
// one; a hash of the thread id would put two of two threads together often.
std::atomic<std::size_t> next_thread_stripe{0};

tl::unexpected<Error> OutOfMemory() {
  return MakeError(ErrorCode::kResourceExhausted,
                   "memory store: out of memory");
}

// A per-thread cache of freed blocks for chains of one and two entries (the
// usual sizes: buckets >= capacity). Every change allocates a chain and
// frees an old one a little later, in a batch once no hazard pointer holds
// it; through malloc that was half of a claim's cost (free-list
// consolidation of the cold blocks), from this cache it is a few loads and
// stores. Blocks are plain memory, so a block freed by one store may serve
// another. Bounded: beyond kCached blocks per size (about two scan batches
// of hazard.cc), blocks go back to the allocator.
class BlockCache {
 public:
  static constexpr std::size_t kSizes = 2;  // Chains of 1 and 2 entries.
  static constexpr std::size_t kCached = 256;

  // A block for a chain of `entries` entries, `bytes` long, or null.
  static void* Take(std::size_t entries, std::size_t bytes) {
    if (entries == 0 || entries > kSizes || t_state.closed) return nullptr;
    Bin& bin = t_state.bins[entries - 1];
    if (bin.count == 0) return nullptr;
    void* block = bin.blocks[--bin.count];
    ASAN_UNPOISON_MEMORY_REGION(block, bytes);
    return block;
  }
  // Keeps `block` (from a chain of `entries` entries, `bytes` long) if there
  // is room; returns false when the caller must free it.
  static bool Put(std::size_t entries, void* block, std::size_t bytes) {
    if (entries == 0 || entries > kSizes || t_state.closed) return false;
    Bin& bin = t_state.bins[entries - 1];
    if (bin.count == kCached) return false;
    if (bin.count == 0) t_drain.Arm();
    ASAN_POISON_MEMORY_REGION(block, bytes);
    bin.blocks[bin.count++] = block;
    return true;
  }

 private:
  struct Bin {
    void* blocks[kCached];
    std::size_t count;
  };
  // Trivially destructible, so usable during thread exit after the drainer
  // below ran (the hazard scheme's teardown may free chains then: they bypass
  // the cache).
  struct State {
    Bin bins[kSizes];
    bool closed;
  };
  // Frees the cached blocks when the thread exits and closes the cache.
  struct Drain {
    bool armed = false;
    void Arm() { armed = true; }
    ~Drain() {
      t_state.closed = true;
      for (Bin& bin : t_state.bins) {
        while (bin.count > 0) ::operator delete(bin.blocks[--bin.count]);
      }
    }
  };
  static thread_local State t_state;
  static thread_local Drain t_drain;
};

thread_local BlockCache::State BlockCache::t_state{};
thread_local BlockCache::Drain BlockCache::t_drain;

}  // namespace

struct MemoryStore::Entry {
  RecordId id;
  Record record;
};

std::size_t MemoryStore::ResponseBytes(const Response& response) {
  std::size_t n = kResponseBytes + response.body.size();
  for (const Header& header : response.headers) {
    n += kHeaderBytes + header.first.size() + header.second.size();
  }
  return n;
}

namespace {

// What unlinking `record` gives back.
std::size_t ChargedBytes(const Record& record) {
  return MemoryStore::kRecordBytes +
         (record.response != nullptr
              ? MemoryStore::ResponseBytes(*record.response)
              : 0);
}

}  // namespace

// An immutable array of entries, allocated in one block with its header.
// Records sit inline: a change costs one allocation (the new chain) and one
// retired object (the old chain), and chains are short (buckets >= capacity),
// so copying the neighbours' records is cheaper than extra indirections. A
// stored response is shared between versions through its shared_ptr.
class MemoryStore::Chain {
 public:
  // Entries are left for the caller to construct, every one of them, with
  // Emplace() before the chain is published or freed.
  static Chain* Make(std::size_t size) {
    void* mem = BlockCache::Take(size, Bytes(size));
    if (mem == nullptr) mem = ::operator new(Bytes(size));
    return ::new (mem) Chain(size);
  }
  // A Deleter for hazard::Retire and for chains that were never published.
  static void Free(void* p) {
    auto* chain = static_cast<Chain*>(p);
    const std::size_t size = chain->size_;
    for (std::size_t i = 0; i < size; ++i) chain->entries()[i].~Entry();
    chain->~Chain();
    if (!BlockCache::Put(size, p, Bytes(size))) ::operator delete(p);
  }

  std::size_t size() const { return size_; }
  const Entry& at(std::size_t i) const { return entries()[i]; }
  // Copying a Record cannot throw (fixed arrays, time points, a shared_ptr),
  // so a chain is never left half-built.
  void Emplace(std::size_t i, const RecordId& id, const Record& record) {
    ::new (&entries()[i]) Entry{id, record};
  }

  // Index of `id`, or size() when absent.
  std::size_t Find(const RecordId& id) const {
    for (std::size_t i = 0; i < size_; ++i) {
      if (entries()[i].id == id) return i;
    }
    return size_;
  }

  // A copy of `chain` with entry `i` holding `record`.
  static Chain* WithReplaced(const Chain* chain, std::size_t i,
                             const Record& record) {
    Chain* next = Make(chain->size_);
    for (std::size_t j = 0; j < chain->size_; ++j) {
      next->Emplace(j, chain->at(j).id, j == i ? record : chain->at(j).record);
    }
    return next;
  }
  // A copy of `chain` (possibly null) with {id, record} added.
  static Chain* WithAdded(const Chain* chain, const RecordId& id,
                          const Record& record) {
    const std::size_t n = chain == nullptr ? 0 : chain->size_;
    Chain* next = Make(n + 1);
    for (std::size_t j = 0; j < n; ++j) {
      next->Emplace(j, chain->at(j).id, chain->at(j).record);
    }
    next->Emplace(n, id, record);
    return next;
  }
  // A copy of `chain` without entry `i`; null when that leaves it empty.
  static Chain* WithRemoved(const Chain* chain, std::size_t i) {
    if (chain->size_ == 1) return nullptr;
    Chain* next = Make(chain->size_ - 1);
    std::size_t k = 0;
    for (std::size_t j = 0; j < chain->size_; ++j) {
      if (j != i) next->Emplace(k++, chain->at(j).id, chain->at(j).record);
    }
    return next;
  }

 private:
  explicit Chain(std::size_t size) : size_(size) {}

  static std::size_t Bytes(std::size_t size) {
    return sizeof(Chain) + size * sizeof(Entry);
  }

  Entry* entries() {
    return reinterpret_cast<Entry*>(reinterpret_cast<char*>(this) +
                                    sizeof(Chain));
  }
  const Entry* entries() const {
    return reinterpret_cast<const Entry*>(reinterpret_cast<const char*>(this) +
                                          sizeof(Chain));
  }

  alignas(Entry) std::size_t size_;
};

struct MemoryStore::SweepResult {
  std::size_t removed = 0;
  std::size_t kept = 0;  // Records left in the bucket.
  TimePoint min_kept_expiry = TimePoint::max();
};

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

}  // namespace

// Claims on a large table touch a random bucket each: with 4 KiB pages that
// is a TLB miss as well as a cache miss. Asking for transparent huge pages
// (Linux, when THP is in "madvise" or "always" mode; a hint, ignored
// elsewhere) makes most of those lookups hit the TLB.
std::atomic<MemoryStore::Chain*>* MemoryStore::AllocateBuckets(
    std::size_t count) {
  const std::size_t bytes = count * sizeof(std::atomic<Chain*>);
  void* mem = nullptr;
  if (bytes >= kHugePage) {
    mem = std::aligned_alloc(kHugePage,
                             (bytes + kHugePage - 1) & ~(kHugePage - 1));
#ifdef MADV_HUGEPAGE
    if (mem != nullptr) ::madvise(mem, bytes, MADV_HUGEPAGE);
#endif
  } else {
    mem = std::malloc(bytes);
  }
  if (mem == nullptr) throw std::bad_alloc();
  auto* buckets = static_cast<std::atomic<Chain*>*>(mem);
  for (std::size_t i = 0; i < count; ++i) {
    ::new (&buckets[i]) std::atomic<Chain*>(nullptr);
  }
  return buckets;
}

void MemoryStore::FreeBuckets::operator()(std::atomic<Chain*>* buckets) const {
  // std::atomic<Chain*> is trivially destructible.
  std::free(buckets);
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
    return std::unique_ptr<MemoryStore>(
        new MemoryStore(options.capacity, options.max_bytes, buckets));
  } catch (const std::bad_alloc&) {
    return MakeError(ErrorCode::kResourceExhausted,
                     "memory store: cannot allocate an index for capacity " +
                         std::to_string(options.capacity));
  }
}

Result<std::unique_ptr<Store>> MemoryStore::OpenFromUri(
    StoreUri& uri, const StoreOptions& /*options*/) {
  if (uri.scheme() != "memory") {
    return tl::unexpected(
        uri.InvalidArgument("scheme '" + uri.scheme() + "' is not memory"));
  }
  if (!uri.user().empty() || !uri.password().empty() || !uri.host().empty() ||
      !uri.port().empty() || !uri.path().empty()) {
    return tl::unexpected(uri.InvalidArgument(
        "unexpected path or host (the memory store takes only "
        "?capacity=N&max_bytes=M)"));
  }
  auto capacity = uri.TakeUint("capacity", 1, kMaxCapacity);
  if (!capacity) return tl::unexpected(capacity.error());
  auto max_bytes = uri.TakeUint("max_bytes", kMinMaxBytes, kMaxMaxBytes);
  if (!max_bytes) return tl::unexpected(max_bytes.error());
  if (Status unknown = uri.RejectUnknown(); !unknown) {
    return tl::unexpected(unknown.error());
  }
  MemoryStoreOptions options;
  if (capacity->has_value()) {
    options.capacity = static_cast<std::size_t>(**capacity);
  }
  if (max_bytes->has_value()) {
    options.max_bytes = static_cast<std::size_t>(**max_bytes);
  }
  auto store = Open(options);
  if (!store) return tl::unexpected(store.error());
  return std::unique_ptr<Store>(std::move(*store));
}

MemoryStore::MemoryStore(std::size_t capacity, std::size_t max_bytes,
                         std::size_t bucket_count)
    : capacity_(capacity),
      max_bytes_(max_bytes),
      bucket_count_(bucket_count),
      bucket_shift_(64 - std::countr_zero(bucket_count)),
      buckets_(AllocateBuckets(bucket_count)),
      // A small store keeps its capacity in the shared count, so that a
      // scan for parked credits is rare.
      credit_batch_(std::clamp<std::size_t>(capacity / (4 * kStripes), 1,
                                            kMaxCreditBatch)),
      byte_batch_(std::clamp<std::size_t>(max_bytes / (4 * kStripes), 1,
                                          kMaxByteBatch)) {
  // The charges estimate the heap a record occupies (memory_store.h): they
  // cover at least its entry (with a share of its chain's header), the
  // shared response with its control block, and each header's strings.
  static_assert(sizeof(Entry) + 16 <= kRecordBytes);
  static_assert(sizeof(Response) + 32 <= kResponseBytes);
  static_assert(sizeof(Header) <= kHeaderBytes);
}

MemoryStore::~MemoryStore() {
  // No concurrent callers (documented), so everything still linked is ours
  // alone and the count is exact: stop once every record is freed. Retired
  // objects belong to the hazard scheme and never point back into the store.
  std::size_t left = size();
  for (std::size_t i = 0; i < bucket_count_ && left > 0; ++i) {
    Chain* chain = buckets_[i].load(std::memory_order_acquire);
    if (chain == nullptr) continue;
    left -= std::min(left, chain->size());
    Chain::Free(chain);
  }
}

std::atomic<MemoryStore::Chain*>& MemoryStore::BucketFor(const RecordId& id) {
  // Ids are SHA-256 outputs, but a multiplicative mix keeps hand-made ids
  // (tests, tools) from piling into one bucket.
  const std::uint64_t h = id.Prefix64() * 0x9E3779B97F4A7C15ull;
  return buckets_[static_cast<std::size_t>(h >> bucket_shift_)];
}

MemoryStore::Stripe& MemoryStore::MyStripe() {
  thread_local const std::size_t index =
      next_thread_stripe.fetch_add(1, std::memory_order_relaxed) % kStripes;
  return stripes_[index];
}

namespace {

// Takes one credit from `credits` if it has any.
bool TakeCredit(std::atomic<std::size_t>& credits) {
  std::size_t c = credits.load(std::memory_order_relaxed);
  while (c > 0) {
    if (credits.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

}  // namespace

// The order of the two steps of a refill (shared count first) and of a
// give-back (stripe first) is what keeps size() from ever reading low.
bool MemoryStore::TryReserveSlot() {
  Stripe& mine = MyStripe();
  if (TakeCredit(mine.credits)) return true;
  std::size_t r = reserved_.load(std::memory_order_relaxed);
  while (r < capacity_) {
    const std::size_t batch = std::min(credit_batch_, capacity_ - r);
    if (reserved_.compare_exchange_weak(r, r + batch, std::memory_order_acq_rel,
                                        std::memory_order_relaxed)) {
      if (batch > 1) {
        mine.credits.fetch_add(batch - 1, std::memory_order_acq_rel);
      }
      return true;
    }
  }
  // The shared count is at capacity: free slots, if any, are parked in
  // other stripes.
  for (Stripe& other : stripes_) {
    if (&other != &mine && TakeCredit(other.credits)) return true;
  }
  return false;
}

void MemoryStore::ReleaseSlots(std::size_t n) {
  Stripe& mine = MyStripe();
  const std::size_t had = mine.credits.fetch_add(n, std::memory_order_acq_rel);
  // Keep one batch here for this thread's next claims; give the rest back
  // to the shared count, where every thread finds it without a scan.
  if (had + n <= 2 * credit_batch_) return;
  std::size_t c = had + n;
  while (c > credit_batch_) {
    if (mine.credits.compare_exchange_weak(c, credit_batch_,
                                           std::memory_order_acq_rel,
                                           std::memory_order_relaxed)) {
      reserved_.fetch_sub(c - credit_batch_, std::memory_order_acq_rel);
      return;
    }
  }
}

// TryReserveSlot for `n` bytes. Unlike a slot, `n` may be more than any one
// stripe holds: after the stripe and the shared count, it gathers every
// stripe's credits and takes only the rest from the shared count, giving
// everything back if that is not enough.
bool MemoryStore::TryReserveBytes(std::size_t n) {
  Stripe& mine = MyStripe();
  std::size_t c = mine.byte_credits.load(std::memory_order_relaxed);
  while (c >= n) {
    if (mine.byte_credits.compare_exchange_weak(
            c, c - n, std::memory_order_acq_rel, std::memory_order_relaxed)) {
      return true;
    }
  }
  // n <= kMaxMaxBytes and reserved <= max_bytes_: the sums cannot overflow.
  std::size_t r = bytes_reserved_.load(std::memory_order_relaxed);
  while (r + n <= max_bytes_) {
    const std::size_t take = std::min(n + byte_batch_, max_bytes_ - r);
    if (bytes_reserved_.compare_exchange_weak(r, r + take,
                                              std::memory_order_acq_rel,
                                              std::memory_order_relaxed)) {
      if (take > n) {
        mine.byte_credits.fetch_add(take - n, std::memory_order_acq_rel);
      }
      return true;
    }
  }
  std::size_t gathered = 0;
  for (Stripe& stripe : stripes_) {
    if (stripe.byte_credits.load(std::memory_order_relaxed) == 0) continue;
    gathered += stripe.byte_credits.exchange(0, std::memory_order_acq_rel);
    if (gathered >= n) break;
  }
  if (gathered < n) {
    const std::size_t rest = n - gathered;
    r = bytes_reserved_.load(std::memory_order_relaxed);
    while (r + rest <= max_bytes_) {
      if (bytes_reserved_.compare_exchange_weak(r, r + rest,
                                                std::memory_order_acq_rel,
                                                std::memory_order_relaxed)) {
        gathered = n;
        break;
      }
    }
  }
  if (gathered < n) {
    if (gathered > 0) ReleaseBytes(gathered);
    return false;
  }
  if (gathered > n) ReleaseBytes(gathered - n);
  return true;
}

void MemoryStore::ReleaseBytes(std::size_t n) {
  if (n == 0) return;
  Stripe& mine = MyStripe();
  const std::size_t had =
      mine.byte_credits.fetch_add(n, std::memory_order_acq_rel);
  if (had + n <= 2 * byte_batch_) return;
  std::size_t c = had + n;
  while (c > byte_batch_) {
    if (mine.byte_credits.compare_exchange_weak(c, byte_batch_,
                                                std::memory_order_acq_rel,
                                                std::memory_order_relaxed)) {
      bytes_reserved_.fetch_sub(c - byte_batch_, std::memory_order_acq_rel);
      return;
    }
  }
}

std::size_t MemoryStore::bytes() const {
  // As size(): credits first, so the result is never low.
  std::size_t credits = 0;
  for (const Stripe& s : stripes_) {
    credits += s.byte_credits.load(std::memory_order_acquire);
  }
  const std::size_t reserved = bytes_reserved_.load(std::memory_order_acquire);
  return reserved > credits ? reserved - credits : 0;
}

TimePoint MemoryStore::LatestNow() const {
  std::int64_t latest = 0;
  for (const Stripe& s : stripes_) {
    latest = std::max(latest, s.latest_now_ns.load(std::memory_order_relaxed));
  }
  return TimePoint(
      std::chrono::duration_cast<Duration>(std::chrono::nanoseconds(latest)));
}

Error MemoryStore::Full() const {
  return Error(ErrorCode::kResourceExhausted,
               "memory store full: " + std::to_string(size()) +
                   " live records (capacity " + std::to_string(capacity_) +
                   "), " + std::to_string(bytes()) + " bytes (max_bytes " +
                   std::to_string(max_bytes_) + ")");
}

void MemoryStore::BumpGeneration() {
  MyStripe().generation.fetch_add(1, std::memory_order_acq_rel);
}

std::uint64_t MemoryStore::GenerationSum() const {
  std::uint64_t sum = 0;
  for (const Stripe& s : stripes_) {
    sum += s.generation.load(std::memory_order_acquire);
  }
  return sum;
}

std::size_t MemoryStore::size() const {
  // Credits first, then the shared count: a refill or give-back running
  // meanwhile makes the result high for an instant, never low, and never
  // above capacity.
  std::size_t credits = 0;
  for (const Stripe& s : stripes_) {
    credits += s.credits.load(std::memory_order_acquire);
  }
  const std::size_t reserved = reserved_.load(std::memory_order_acquire);
  return reserved > credits ? reserved - credits : 0;
}

MemoryStoreStats MemoryStore::stats() const {
  MemoryStoreStats s;
  s.records = size();
  s.capacity = capacity_;
  s.buckets = bucket_count_;
  s.bytes = bytes();
  s.max_bytes = max_bytes_;
  s.reclaim_sweeps = reclaim_sweeps_.load(std::memory_order_relaxed);
  s.swept_buckets = swept_buckets_.load(std::memory_order_relaxed);
  s.reclaimed = reclaimed_.load(std::memory_order_relaxed);
  s.purged = purged_.load(std::memory_order_relaxed);
  return s;
}

StoreInfo MemoryStore::Info() const {
  return StoreInfo{.name = "memory",
                   .durable = false,
                   .shared_across_processes = false,
                   .calls_may_block = false};
}

// Removes up to `limit` records of `bucket` that have expired at `now`.
MemoryStore::SweepResult MemoryStore::SweepBucket(std::atomic<Chain*>& bucket,
                                                  TimePoint now,
                                                  std::size_t limit) {
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
        removed_bytes += ChargedBytes(cur->at(i).record);
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
          next->Emplace(k++, cur->at(i).id, cur->at(i).record);
        }
      }
    }
    Chain* expected = cur;
    if (bucket.compare_exchange_strong(expected, next,
                                       std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {
      hazard::Retire(cur, &Chain::Free);
      ReleaseSlots(result.removed);
      ReleaseBytes(removed_bytes);
      return result;
    }
    if (next != nullptr) Chain::Free(next);
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
void MemoryStore::ReclaimForClaim(TimePoint now) {
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

  const std::size_t batch = std::min(kSweepBatch, bucket_count_);
  std::size_t removed = 0;
  for (std::size_t i = 0; i < batch; ++i) {
    const SweepResult r = SweepBucket(buckets_[s.next_bucket], now,
                                      std::numeric_limits<std::size_t>::max());
    s.next_bucket = (s.next_bucket + 1) & (bucket_count_ - 1);
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
  if (s.buckets_examined >= bucket_count_) {
    s.buckets_examined = 0;
    if (GenerationSum() == s.generation) {
      s.hint_valid = true;
      s.hint_gen = s.generation;
      s.hint_until = s.min_expiry;
    }
  }
}

Result<ClaimResult> MemoryStore::Claim(const RecordId& id,
                                       const Fingerprint& fp, TimePoint now,
                                       Duration ttl, Duration lock_timeout) {
  if (ttl <= Duration::zero() || lock_timeout <= Duration::zero()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "memory store: ttl and lock_timeout must be positive");
  }
  try {
    return ClaimImpl(id, fp, now, ttl, lock_timeout);
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

Result<ClaimResult> MemoryStore::ClaimImpl(const RecordId& id,
                                           const Fingerprint& fp, TimePoint now,
                                           Duration ttl,
                                           Duration lock_timeout) {
  std::atomic<Chain*>& bucket = BucketFor(id);
  // The bucket is usually a cache (and TLB) miss, the largest single cost of
  // a claim on a big table: start loading it, and build the record a claim
  // would insert meanwhile. Measured on one thread: a fresh claim+complete
  // costs 25-55 ns less, a replay (whose bucket is hot, and which throws the
  // record away) about 12 ns more; fresh claims are the common case.
  __builtin_prefetch(&bucket);
  const Record fresh = NewClaimRecord(fp, now, ttl, lock_timeout);
  {
    std::atomic<std::int64_t>& latest = MyStripe().latest_now_ns;
    const std::int64_t now_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            now.time_since_epoch())
            .count();
    if (latest.load(std::memory_order_relaxed) < now_ns) {
      latest.store(now_ns, std::memory_order_relaxed);
    }
  }
  hazard::Pointer hp;
  int full_attempts = 0;
  for (;;) {
    Chain* cur = hp.Protect(bucket);
    const std::size_t index = cur == nullptr ? 0 : cur->Find(id);
    const Record* old = cur != nullptr && index < cur->size()
                            ? &cur->at(index).record
                            : nullptr;
    if (old != nullptr) {
      if (auto blocked = ClaimBlockedBy(*old, fp, now)) return *blocked;
    }
    // Absent, expired, or in progress with its lock timed out (a takeover):
    // a fresh record goes in below.
    const bool live = old != nullptr && !old->Expired(now);
    Chain* next = old != nullptr ? Chain::WithReplaced(cur, index, fresh)
                                 : Chain::WithAdded(cur, id, fresh);
    // A new id needs a slot. It is reserved right before the CAS so that
    // claims racing on the same new id hold extra slots only for an instant.
    const bool needs_slot = old == nullptr;
    bool reserved = needs_slot && TryReserveSlot();
    if (reserved && !TryReserveBytes(kRecordBytes)) {
      ReleaseSlots(1);
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
    Chain* expected = cur;
    if (!bucket.compare_exchange_strong(expected, next,
                                        std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
      if (needs_slot) {
        ReleaseSlots(1);
        ReleaseBytes(kRecordBytes);
      }
      Chain::Free(next);
      continue;
    }
    ClaimResult result;
    result.outcome = ClaimOutcome::kAcquired;
    result.token = fresh.token;
    result.takeover = live;
    result.locked_until = fresh.locked_until;
    // An expired completed record replaced: its response goes with it (its
    // kRecordBytes stay, for the fresh record in its slot).
    if (old != nullptr && old->response != nullptr) {
      ReleaseBytes(ResponseBytes(*old->response));
    }
    // `old` lives in `cur`: retired together.
    if (cur != nullptr) hazard::Retire(cur, &Chain::Free);
    BumpGeneration();  // A new expiry is published: see ReclaimForClaim.
    return result;
  }
}

Result<bool> MemoryStore::Complete(const RecordId& id, const Token& token,
                                   const Response& response) {
  try {
    return CompleteImpl(id, token, &response, nullptr);
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

Result<bool> MemoryStore::CompleteShared(
    const RecordId& id, const Token& token,
    std::shared_ptr<const Response> response) {
  if (response == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "memory store: CompleteShared without a response");
  }
  try {
    return CompleteImpl(id, token, nullptr, std::move(response));
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

// Exactly one of `response` and `stored` is set; a copy of `response` is made
// only once the record is known to be completable. Its bytes are charged
// once, before the first CAS, and given back unless a CAS publishes it.
Result<bool> MemoryStore::CompleteImpl(const RecordId& id, const Token& token,
                                       const Response* response,
                                       std::shared_ptr<const Response> stored) {
  hazard::Pointer hp;
  std::atomic<Chain*>& bucket = BucketFor(id);
  struct Charge {
    MemoryStore& store;
    std::size_t bytes = 0;
    ~Charge() { store.ReleaseBytes(bytes); }
  } charge{*this};
  int full_attempts = 0;
  for (;;) {
    Chain* cur = hp.Protect(bucket);
    if (cur == nullptr) return false;
    const std::size_t index = cur->Find(id);
    if (index == cur->size()) return false;
    const Record& old = cur->at(index).record;
    if (old.state != RecordState::kInProgress || old.token != token) {
      return false;
    }
    if (stored == nullptr) stored = std::make_shared<const Response>(*response);
    if (charge.bytes == 0) {
      const std::size_t need = ResponseBytes(*stored);
      if (!TryReserveBytes(need)) {
        // As a claim does: reclaim expired records (by the latest time a
        // claim saw; Complete has none of its own), look again, then fail
        // leaving the record in progress.
        if (full_attempts == 0) ReclaimForClaim(LatestNow());
        if (++full_attempts < kFullAttempts) continue;
        return tl::unexpected(Full());
      }
      charge.bytes = need;
    }
    Record completed = old;
    completed.state = RecordState::kCompleted;
    completed.response = stored;
    Chain* next = Chain::WithReplaced(cur, index, completed);
    Chain* expected = cur;
    if (bucket.compare_exchange_strong(expected, next,
                                       std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {
      hazard::Retire(cur, &Chain::Free);
      charge.bytes = 0;  // Now the record's, given back when it goes.
      return true;
    }
    Chain::Free(next);
  }
}

Result<bool> MemoryStore::Release(const RecordId& id, const Token& token) {
  try {
    return ReleaseImpl(id, token);
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

bool MemoryStore::ReleaseImpl(const RecordId& id, const Token& token) {
  hazard::Pointer hp;
  std::atomic<Chain*>& bucket = BucketFor(id);
  for (;;) {
    Chain* cur = hp.Protect(bucket);
    if (cur == nullptr) return false;
    const std::size_t index = cur->Find(id);
    if (index == cur->size()) return false;
    const Record& old = cur->at(index).record;
    if (old.state != RecordState::kInProgress || old.token != token) {
      return false;
    }
    const std::size_t charged = ChargedBytes(old);
    Chain* next = Chain::WithRemoved(cur, index);
    Chain* expected = cur;
    if (bucket.compare_exchange_strong(expected, next,
                                       std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {
      hazard::Retire(cur, &Chain::Free);
      ReleaseSlots(1);
      ReleaseBytes(charged);
      return true;
    }
    if (next != nullptr) Chain::Free(next);
  }
}

Result<bool> MemoryStore::Revoke(const RecordId& id) {
  try {
    return RevokeImpl(id);
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

bool MemoryStore::RevokeImpl(const RecordId& id) {
  hazard::Pointer hp;
  std::atomic<Chain*>& bucket = BucketFor(id);
  for (;;) {
    Chain* cur = hp.Protect(bucket);
    if (cur == nullptr) return false;
    const std::size_t index = cur->Find(id);
    if (index == cur->size()) return false;
    const std::size_t charged = ChargedBytes(cur->at(index).record);
    Chain* next = Chain::WithRemoved(cur, index);
    Chain* expected = cur;
    if (bucket.compare_exchange_strong(expected, next,
                                       std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {
      hazard::Retire(cur, &Chain::Free);
      ReleaseSlots(1);
      ReleaseBytes(charged);
      return true;
    }
    if (next != nullptr) Chain::Free(next);
  }
}

Result<std::optional<Record>> MemoryStore::Inspect(const RecordId& id,
                                                   TimePoint now) {
  try {
    hazard::Pointer hp;
    const Chain* cur = hp.Protect(BucketFor(id));
    if (cur == nullptr) return std::nullopt;
    const std::size_t index = cur->Find(id);
    if (index == cur->size()) return std::nullopt;
    const Record& record = cur->at(index).record;
    if (record.Expired(now)) return std::nullopt;
    return std::optional<Record>(record);
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

Result<std::size_t> MemoryStore::PurgeExpired(TimePoint now,
                                              std::size_t limit) {
  try {
    return PurgeImpl(now, limit);
  } catch (const std::bad_alloc&) {
    return OutOfMemory();
  }
}

std::size_t MemoryStore::PurgeImpl(TimePoint now, std::size_t limit) {
  // Once as many records were seen as were held at the start, the rest of
  // the table is (almost surely) empty: stop rather than walk it. Records
  // added meanwhile may be missed, as if they came after the call.
  const std::size_t held = size();
  if (limit == 0 || held == 0) return 0;
  const std::size_t mask = bucket_count_ - 1;
  const std::size_t start = purge_next_bucket_.load(std::memory_order_relaxed);
  std::size_t removed = 0;
  std::size_t seen = 0;
  std::size_t examined = 0;
  for (; examined < bucket_count_ && removed < limit && seen < held;
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

}  // namespace idem
