// Epoch-based reclamation; see epoch.h for the protocol.
//
// Memory orders. The proof that a reader R cannot touch an object X that a
// collector frees needs: (1) the unlinking CAS of X precedes, in the single
// total order S of seq_cst operations, the retirer's read of the global epoch
// r; (2) R's pin (an exchange) is in S, and R's later loads of the structure
// are seq_cst, so when the advancer that moved the epoch from r+1 to r+2 did
// not see R pinned, R pinned after that advancer's (seq_cst) load of the epoch
// and hence after the unlink: R's loads see the structure without X. When the
// advancer saw R unpinned (or re-pinned) after R had read X, R's unpin/pin is
// a release read by the advancer's acquire load, and the advancer's CAS on the
// epoch is read by the collector: R's reads happen before the free. Only
// seq_cst operations and acquire/release are used (no standalone fences), so
// ThreadSanitizer models the protocol exactly.

#include "epoch.h"

#include <atomic>
#include <cassert>
#include <deque>
#include <utility>
#include <vector>

namespace idem::epoch {
namespace {

// Value of ThreadRecord::local when the thread is not pinned; a pinned thread
// stores (epoch << 1) | 1.
constexpr std::uint64_t kUnpinned = 0;
// How many Retire() calls between two collection attempts by one thread.
// Advancing scans every thread record, so it is amortised over a batch.
constexpr std::uint32_t kCollectInterval = 64;

constexpr std::uint64_t Pinned(std::uint64_t epoch) { return (epoch << 1) | 1; }

struct RetiredObject {
  void* object;
  Deleter deleter;
};

// Objects retired by one thread while the global epoch was `epoch`.
struct Bag {
  std::uint64_t epoch = 0;
  std::vector<RetiredObject> objects;
};

// A bag left behind by an exited thread, in the global orphan stack.
struct OrphanBatch {
  Bag bag;
  OrphanBatch* next = nullptr;
};

void FreeAll(std::vector<RetiredObject>& objects) {
  for (const RetiredObject& r : objects) r.deleter(r.object);
  objects.clear();
}

// All three globals are constant-initialized and trivially destructible, so
// they are usable from any thread_local destructor and at process exit. What
// they point to is never freed (thread records) or freed by collections
// (orphans); it stays reachable, which LeakSanitizer accepts.
constinit std::atomic<std::uint64_t> g_epoch{0};
constinit std::atomic<ThreadRecord*> g_records{nullptr};
constinit std::atomic<OrphanBatch*> g_orphans{nullptr};

}  // namespace

// One per registered thread. `local` is read by every advancer; the rest is
// touched only by the owning thread. Cache-line aligned so that pinning does
// not bounce another thread's line.
struct alignas(64) ThreadRecord {
  std::atomic<std::uint64_t> local{kUnpinned};
  std::atomic<bool> in_use{false};
  ThreadRecord* next = nullptr;  // Immutable once the record is published.

  // Owner-only state.
  int nesting = 0;
  std::uint32_t retired_since_collect = 0;
  Bag current;
  std::deque<Bag> sealed;  // Older bags, ascending epochs.
};

namespace {

// Moves the epoch from e to e+1 if every pinned thread has published e.
void TryAdvance() {
  std::uint64_t e = g_epoch.load(std::memory_order_seq_cst);
  for (ThreadRecord* r = g_records.load(std::memory_order_acquire); r;
       r = r->next) {
    const std::uint64_t v = r->local.load(std::memory_order_seq_cst);
    if (v != kUnpinned && v != Pinned(e)) return;
  }
  // Losing this CAS means another thread advanced: just as good.
  g_epoch.compare_exchange_strong(e, e + 1, std::memory_order_seq_cst,
                                  std::memory_order_relaxed);
}

void PushOrphans(OrphanBatch* first, OrphanBatch* last) {
  OrphanBatch* head = g_orphans.load(std::memory_order_relaxed);
  do {
    last->next = head;
  } while (!g_orphans.compare_exchange_weak(
      head, first, std::memory_order_release, std::memory_order_relaxed));
}

// Frees the orphan batches retired at epoch <= safe_epoch. Takes the whole
// stack at once (no ABA: nobody pops single nodes) and pushes back the rest.
void CollectOrphans(std::uint64_t safe_epoch) {
  if (g_orphans.load(std::memory_order_relaxed) == nullptr) return;
  OrphanBatch* list = g_orphans.exchange(nullptr, std::memory_order_acquire);
  OrphanBatch* keep_first = nullptr;
  OrphanBatch* keep_last = nullptr;
  while (list != nullptr) {
    OrphanBatch* next = list->next;
    if (list->bag.epoch <= safe_epoch) {
      FreeAll(list->bag.objects);
      delete list;
    } else {
      list->next = keep_first;
      keep_first = list;
      if (keep_last == nullptr) keep_last = list;
    }
    list = next;
  }
  if (keep_first != nullptr) PushOrphans(keep_first, keep_last);
}

// Advances if possible, then frees what this thread and exited threads
// retired two or more epochs ago. Callable pinned or not.
void CollectFor(ThreadRecord* rec) {
  rec->retired_since_collect = 0;
  TryAdvance();
  const std::uint64_t g = g_epoch.load(std::memory_order_acquire);
  if (g < 2) return;
  const std::uint64_t safe = g - 2;
  while (!rec->sealed.empty() && rec->sealed.front().epoch <= safe) {
    FreeAll(rec->sealed.front().objects);
    rec->sealed.pop_front();
  }
  if (rec->current.epoch <= safe) FreeAll(rec->current.objects);
  CollectOrphans(safe);
}

ThreadRecord* AcquireRecord() {
  for (ThreadRecord* r = g_records.load(std::memory_order_acquire); r;
       r = r->next) {
    bool expected = false;
    if (!r->in_use.load(std::memory_order_relaxed) &&
        r->in_use.compare_exchange_strong(expected, true,
                                          std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
      return r;
    }
  }
  auto* r = new ThreadRecord;
  r->in_use.store(true, std::memory_order_relaxed);
  ThreadRecord* head = g_records.load(std::memory_order_relaxed);
  do {
    r->next = head;
  } while (!g_records.compare_exchange_weak(head, r, std::memory_order_release,
                                            std::memory_order_relaxed));
  return r;
}

// Gives the record back: what it retired and could not free yet becomes
// orphans, freed by whichever thread collects once it is safe.
void ReleaseRecord(ThreadRecord* rec) {
  assert(rec->nesting == 0);
  CollectFor(rec);
  OrphanBatch* first = nullptr;
  OrphanBatch* last = nullptr;
  auto orphan = [&](Bag&& bag) {
    if (bag.objects.empty()) return;
    auto* b = new OrphanBatch{std::move(bag), first};
    first = b;
    if (last == nullptr) last = b;
  };
  for (Bag& bag : rec->sealed) orphan(std::move(bag));
  rec->sealed.clear();
  orphan(std::move(rec->current));
  rec->current = Bag{};
  if (first != nullptr) PushOrphans(first, last);
  rec->local.store(kUnpinned, std::memory_order_release);
  rec->in_use.store(false, std::memory_order_release);
}

// The calling thread's record, or null before registration and after its
// thread_local state was destroyed. A plain pointer (trivially destructible),
// so reading it at thread exit is well defined.
thread_local ThreadRecord* tls_record = nullptr;
thread_local bool tls_exited = false;

// Its destructor runs at thread exit and returns the record. Constructed on
// the thread's first registration only, so threads that never touch a store
// pay nothing.
struct ThreadExit {
  void Arm() {}
  ~ThreadExit() {
    tls_exited = true;
    if (tls_record != nullptr) {
      ReleaseRecord(tls_record);
      tls_record = nullptr;
    }
  }
};
thread_local ThreadExit tls_exit;

}  // namespace

Guard::Guard() : record_(tls_record), transient_(false) {
  if (record_ == nullptr) {
    record_ = AcquireRecord();
    tls_record = record_;
    if (tls_exited) {
      transient_ = true;
    } else {
      tls_exit.Arm();  // Registers the exit hook for this thread.
    }
  }
  if (record_->nesting++ == 0) {
    const std::uint64_t e = g_epoch.load(std::memory_order_seq_cst);
    record_->local.exchange(Pinned(e), std::memory_order_seq_cst);
  }
}

Guard::~Guard() {
  if (--record_->nesting == 0) {
    record_->local.store(kUnpinned, std::memory_order_release);
    if (transient_) {
      tls_record = nullptr;
      ReleaseRecord(record_);
    }
  }
}

void Retire(void* object, Deleter deleter) {
  ThreadRecord* rec = tls_record;
  assert(rec != nullptr && rec->nesting > 0);
  const std::uint64_t g = g_epoch.load(std::memory_order_seq_cst);
  if (rec->current.epoch != g) {
    if (!rec->current.objects.empty()) {
      rec->sealed.push_back(std::move(rec->current));
      rec->current = Bag{};
    }
    rec->current.epoch = g;
  }
  rec->current.objects.push_back({object, deleter});
  if (++rec->retired_since_collect >= kCollectInterval) CollectFor(rec);
}

DomainStats GetStats() {
  DomainStats s;
  s.epoch = g_epoch.load(std::memory_order_acquire);
  for (ThreadRecord* r = g_records.load(std::memory_order_acquire); r;
       r = r->next) {
    ++s.thread_records;
    if (r->in_use.load(std::memory_order_acquire)) ++s.thread_records_in_use;
  }
  // Counting orphans means walking the stack, which a concurrent collector
  // may be freeing: take it, count, and push it back.
  OrphanBatch* list = g_orphans.exchange(nullptr, std::memory_order_acquire);
  OrphanBatch* last = nullptr;
  for (OrphanBatch* b = list; b; b = b->next) {
    ++s.orphan_batches;
    last = b;
  }
  if (list != nullptr) PushOrphans(list, last);
  return s;
}

void Collect() {
  ThreadRecord* rec = tls_record;
  if (rec == nullptr) {
    // Not registered: help with the global work only.
    TryAdvance();
    const std::uint64_t g = g_epoch.load(std::memory_order_acquire);
    if (g >= 2) CollectOrphans(g - 2);
    return;
  }
  assert(rec->nesting == 0);
  CollectFor(rec);
}

}  // namespace idem::epoch
