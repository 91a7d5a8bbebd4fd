// Hazard-pointer reclamation; see memory_hazard.h for the protocol.
//
// Memory orders. Why a scanner S cannot free an object X that a reader R
// dereferences: R stores X into its slot (seq_cst), then reloads the source
// (seq_cst) and sees X still linked. The retirer unlinked X with a seq_cst
// CAS on that source before retiring it, and S's slot loads are seq_cst and
// come after the unlink (same thread, or the orphan hand-over, which is
// release/acquire). In the single total order of seq_cst operations, R's
// reload precedes the unlink (it saw X linked), so R's slot store precedes
// S's slot load, which therefore sees X or a later value of the slot. A
// later value is written by R after it finished with X (a release store, or
// a seq_cst one, sequenced after R's reads), so S's acquire load of it makes
// R's reads happen before the free. Only seq_cst and acquire/release
// operations are used (no standalone fences), so ThreadSanitizer models the
// protocol exactly.

#include "memory_hazard.h"

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

namespace idem::hazard {
namespace {

// Retirements between two scans are at least this many, and at least twice
// the number of slots, so a scan (which reads every slot) frees about half
// of what it examines or more, and its cost is amortised over the batch.
constexpr std::size_t kMinScanBatch = 128;

struct RetiredObject {
  void* object;
  Deleter deleter;
};

// Objects left by an exited thread that some slot still protected, in the
// global orphan stack.
struct OrphanBatch {
  std::vector<RetiredObject> objects;
  OrphanBatch* next = nullptr;
};

// All globals are constant-initialized and trivially destructible, so they
// are usable from any thread_local destructor and at process exit. What they
// point to is never freed (thread records) or freed by scans (orphans); it
// stays reachable, which LeakSanitizer accepts.
constinit std::atomic<ThreadRecord*> g_records{nullptr};
constinit std::atomic<std::size_t> g_record_count{0};
constinit std::atomic<OrphanBatch*> g_orphans{nullptr};

}  // namespace

// One per registered thread. The slots are read by every scan; the rest is
// touched only by the owning thread. Cache-line aligned so that protecting
// does not write a line another thread's record shares.
struct alignas(64) ThreadRecord {
  std::atomic<void*> slots[kSlotsPerThread] = {};
  std::atomic<bool> in_use{false};
  ThreadRecord* next = nullptr;  // Immutable once the record is published.

  // Owner-only state.
  int depth = 0;  // Slots held by live Pointers.
  bool scanning = false;
  std::vector<RetiredObject> retired;
  // Reused buffers of scans (kept to avoid allocating per scan).
  std::vector<RetiredObject> examined;
  std::vector<void*> hazards;
};

namespace {

void PushOrphans(OrphanBatch* batch) {
  OrphanBatch* head = g_orphans.load(std::memory_order_relaxed);
  do {
    batch->next = head;
  } while (!g_orphans.compare_exchange_weak(
      head, batch, std::memory_order_release, std::memory_order_relaxed));
}

// Moves every orphan into `rec`'s retired list. Takes the whole stack at
// once, so there is no ABA (nobody pops single nodes).
void AdoptOrphans(ThreadRecord* rec) {
  if (g_orphans.load(std::memory_order_relaxed) == nullptr) return;
  OrphanBatch* list = g_orphans.exchange(nullptr, std::memory_order_acquire);
  while (list != nullptr) {
    OrphanBatch* next = list->next;
    try {
      rec->retired.insert(rec->retired.end(), list->objects.begin(),
                          list->objects.end());
    } catch (const std::bad_alloc&) {
      // Out of memory: the batches not adopted go back for a later scan.
      while (list != nullptr) {
        next = list->next;
        PushOrphans(list);
        list = next;
      }
      throw;
    }
    delete list;
    list = next;
  }
}

// Frees the retired objects of `rec` (and the adopted orphans) that no slot
// protects; keeps the others for a later scan. Throws std::bad_alloc having
// freed nothing it should not have: at worst some objects are leaked.
void ScanOnce(ThreadRecord* rec) {
  AdoptOrphans(rec);

  std::vector<void*>& hazards = rec->hazards;
  hazards.clear();
  for (ThreadRecord* r = g_records.load(std::memory_order_acquire); r;
       r = r->next) {
    for (std::atomic<void*>& slot : r->slots) {
      if (void* p = slot.load(std::memory_order_seq_cst)) hazards.push_back(p);
    }
  }
  std::sort(hazards.begin(), hazards.end());

  // Deleters may retire more objects into rec->retired: examine a detached
  // list, and put the survivors back beside whatever arrived meanwhile.
  std::vector<RetiredObject>& examined = rec->examined;
  examined.clear();
  examined.swap(rec->retired);
  std::size_t kept = 0;
  for (const RetiredObject& r : examined) {
    if (std::binary_search(hazards.begin(), hazards.end(), r.object)) {
      examined[kept++] = r;
    } else {
      r.deleter(r.object);
    }
  }
  examined.resize(kept);
  rec->retired.insert(rec->retired.end(), examined.begin(), examined.end());
  examined.clear();
}

// ScanOnce, unless a scan is already running in this thread (a deleter
// retired something: it waits for the next scan). Never throws: out of
// memory, the scan stops and the next one tries again; Retire's callers have
// already made their change and must not see it fail.
void Scan(ThreadRecord* rec) {
  if (rec->scanning) return;
  rec->scanning = true;
  try {
    ScanOnce(rec);
  } catch (const std::bad_alloc&) {
  }
  rec->scanning = false;
}

std::size_t ScanBatch() {
  return std::max(
      kMinScanBatch,
      2 * kSlotsPerThread * g_record_count.load(std::memory_order_relaxed));
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
  g_record_count.fetch_add(1, std::memory_order_relaxed);
  ThreadRecord* head = g_records.load(std::memory_order_relaxed);
  do {
    r->next = head;
  } while (!g_records.compare_exchange_weak(head, r, std::memory_order_release,
                                            std::memory_order_relaxed));
  return r;
}

// Gives the record back: what it retired and is still protected becomes an
// orphan batch, adopted by whichever thread scans next.
void ReleaseRecord(ThreadRecord* rec) {
  assert(rec->depth == 0);
  for (std::atomic<void*>& slot : rec->slots) {
    slot.store(nullptr, std::memory_order_release);
  }
  Scan(rec);
  if (!rec->retired.empty()) {
    // Out of memory (this may run at thread exit, where throwing would
    // terminate), the objects still protected are leaked instead.
    if (auto* batch = new (std::nothrow) OrphanBatch) {
      batch->objects.swap(rec->retired);
      PushOrphans(batch);
    }
  }
  // The buffers would otherwise stay allocated in an idle record.
  std::vector<RetiredObject>().swap(rec->retired);
  std::vector<RetiredObject>().swap(rec->examined);
  std::vector<void*>().swap(rec->hazards);
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

// The calling thread's record, registering it first if needed. `transient`
// is set when the record is borrowed (thread exit already ran) and must be
// given back by the caller.
ThreadRecord* RecordForThisThread(bool& transient) {
  transient = false;
  ThreadRecord* rec = tls_record;
  if (rec == nullptr) {
    rec = AcquireRecord();
    tls_record = rec;
    if (tls_exited) {
      transient = true;
    } else {
      tls_exit.Arm();  // Registers the exit hook for this thread.
    }
  }
  return rec;
}

}  // namespace

Pointer::Pointer() {
  record_ = RecordForThisThread(transient_);
  // More nesting than slots is a programming error in this library.
  if (record_->depth >= kSlotsPerThread) std::abort();
  slot_ = &record_->slots[record_->depth++];
}

Pointer::~Pointer() {
  slot_->store(nullptr, std::memory_order_release);
  if (--record_->depth == 0 && transient_) {
    tls_record = nullptr;
    ReleaseRecord(record_);
  }
}

void Retire(void* object, Deleter deleter) {
  ThreadRecord* rec = tls_record;
  assert(rec != nullptr && rec->depth > 0);
  try {
    rec->retired.push_back({object, deleter});
  } catch (const std::bad_alloc&) {
    // Out of memory with `object` already unlinked: freeing it now is not
    // safe, and the change that unlinked it has happened, so the object is
    // leaked rather than the caller's successful call reported as failed.
    // (The list keeps its capacity between scans: this needs a new peak.)
    return;
  }
  if (rec->retired.size() >= ScanBatch()) Scan(rec);
}

DomainStats GetStats() {
  DomainStats s;
  for (ThreadRecord* r = g_records.load(std::memory_order_acquire); r;
       r = r->next) {
    ++s.thread_records;
    if (r->in_use.load(std::memory_order_acquire)) ++s.thread_records_in_use;
  }
  // Counting orphans means walking the stack, which a concurrent scan may be
  // adopting: take it, count, and push it back.
  OrphanBatch* list = g_orphans.exchange(nullptr, std::memory_order_acquire);
  while (list != nullptr) {
    OrphanBatch* next = list->next;
    s.orphans += list->objects.size();
    PushOrphans(list);
    list = next;
  }
  return s;
}

void Collect() {
  ThreadRecord* rec = tls_record;
  if (rec == nullptr) {
    // Not registered: scan with a borrowed record (what it cannot free goes
    // back to the orphans), so that collecting does not register the thread.
    rec = AcquireRecord();
    ReleaseRecord(rec);
    return;
  }
  Scan(rec);
}

}  // namespace idem::hazard
