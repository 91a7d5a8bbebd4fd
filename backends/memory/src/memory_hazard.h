// Hazard-pointer memory reclamation for the lock-free in-memory store.
//
// A lock-free structure unlinks an object with a CAS, but another thread may
// still be reading it through a pointer it loaded just before. Such an object
// is handed to Retire() instead of being deleted; it is deleted once no
// thread protects it.
//
// Protocol (hazard pointers): a reader announces the pointer it is about to
// dereference in one of its thread's slots, then checks that the pointer is
// still linked where it read it; from then on the object cannot be freed
// until the slot changes. A thread's retired objects are kept in a private
// list; every so many retirements (and on Collect) the thread snapshots all
// slots of all threads and frees the retired objects that none of them
// holds.
//
// Why hazard pointers and not epochs: with epochs, one reader that is
// descheduled inside its critical section holds back the reclamation of
// every object retired meanwhile, by every thread. With more threads than
// cores that is the common case (a preempted thread is usually inside a
// store call), and memory then grows until the scheduler runs it again;
// measured, most replaced records went back through malloc. A hazard pointer
// holds back only the one object it protects, so unreclaimed memory stays
// bounded (per thread: the retire batch plus what other threads protect)
// whatever the scheduler does.
//
// Threads register lazily: the first Pointer in a thread takes a free
// per-thread record from a global lock-free list (or appends a new one); a
// thread_local destructor gives the record back when the thread exits and
// moves the objects it retired that are still protected to a global orphan
// list, which later scans adopt. The host application never registers
// threads. Records are never freed; they are reused, so there are at most as
// many as threads ever alive at once.
//
// Progress: Protect is lock-free (it retries only when the source changed in
// between); Retire, scans and Collect are wait-free apart from the memory
// allocator. Nothing ever waits for another thread.
//
// Thread-safety: all functions may be called from any thread. Pointers nest
// up to kSlotsPerThread deep in one thread.

#ifndef IDEM_BACKENDS_MEMORY_SRC_HAZARD_H_
#define IDEM_BACKENDS_MEMORY_SRC_HAZARD_H_

#include <atomic>
#include <cstddef>

namespace idem::hazard {

// Slots per thread: a store call protects one chain at a time, and a claim
// that sweeps other buckets for expired records protects one more.
inline constexpr int kSlotsPerThread = 2;

struct ThreadRecord;

// One hazard slot of the calling thread, held for the pointer's lifetime.
// Must be destroyed by the thread that created it, in reverse order of
// creation (scopes guarantee both).
class Pointer {
 public:
  Pointer();
  ~Pointer();
  Pointer(const Pointer&) = delete;
  Pointer& operator=(const Pointer&) = delete;

  // Reads `src` and protects the object it points to: the result (possibly
  // null) stays valid until the next Protect or Reset of this pointer, or
  // its destruction. Objects must be published with a release (or stronger)
  // store or CAS, and unlinked with a seq_cst one before being retired.
  template <typename T>
  T* Protect(const std::atomic<T*>& src) {
    T* p = src.load(std::memory_order_acquire);
    for (;;) {
      // Null needs no protection; the slot keeps its old value, which at
      // worst delays freeing one object until the next Protect or Reset.
      if (p == nullptr) return nullptr;
      // seq_cst store then seq_cst load: the scan of a retirer that unlinked
      // `p` after this load sees the slot (memory_hazard.cc has the argument).
      slot_->store(p, std::memory_order_seq_cst);
      T* again = src.load(std::memory_order_seq_cst);
      if (again == p) return p;
      p = again;
    }
  }

  // Stops protecting whatever this pointer protected.
  void Reset() { slot_->store(nullptr, std::memory_order_release); }

 private:
  ThreadRecord* record_;
  std::atomic<void*>* slot_;
  // True when the thread's thread_local state was already destroyed (a call
  // made from another thread_local destructor at thread exit): the record is
  // then borrowed for this pointer only.
  bool transient_;
};

using Deleter = void (*)(void*);

// Schedules `deleter(object)` for when no thread protects `object`. Must be
// called while the calling thread holds a Pointer, after `object` was made
// unreachable for new readers (its unlinking seq_cst CAS succeeded). Never
// blocks and never throws (out of memory, the object is leaked); may run
// deleters of objects retired earlier.
void Retire(void* object, Deleter deleter);

template <typename T>
void Retire(T* object) {
  Retire(static_cast<void*>(object),
         [](void* p) { delete static_cast<T*>(p); });
}

// For tests and diagnostics.
struct DomainStats {
  std::size_t thread_records = 0;  // Ever created (reused ones count once).
  std::size_t thread_records_in_use = 0;
  std::size_t orphans = 0;  // Objects left by exited threads, not freed yet.
};
DomainStats GetStats();

// Frees every object retired by the calling thread, or left by exited
// threads, that no thread protects now (the calling thread's own Pointers
// included). Deterministic tests call it to force reclamation.
void Collect();

}  // namespace idem::hazard

#endif  // IDEM_BACKENDS_MEMORY_SRC_HAZARD_H_
