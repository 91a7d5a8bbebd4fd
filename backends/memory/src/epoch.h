// Epoch-based memory reclamation for the lock-free in-memory store.
//
// A lock-free structure unlinks an object with a CAS, but another thread may
// still be reading it through a pointer it loaded just before. Such an object
// is handed to Retire() instead of being deleted; it is deleted once every
// thread that could have seen it has left the critical section it was in.
//
// Protocol (classic three-epoch EBR):
//  - A global epoch counter. Every operation on the structure runs inside a
//    Guard, which "pins" the calling thread: it publishes the global epoch it
//    read in its per-thread record.
//  - Retire() files the object under the global epoch read after the unlink.
//  - The epoch advances from e to e+1 only when every pinned thread has
//    published e. An object retired at epoch r is freed once the global epoch
//    reaches r+2: any reader that could still hold it was pinned at r or
//    earlier and must have unpinned for the epoch to pass r+1.
//
// Threads register lazily: the first Guard in a thread takes a free
// per-thread record from a global lock-free list (or appends a new one); a
// thread_local destructor gives the record back when the thread exits and
// moves the objects it retired but could not free yet to a global orphan
// list that later collections free. The host application never registers
// threads. Per-thread records are never freed; they are reused, so there are
// at most as many as threads ever alive at once.
//
// Progress: Guard, Retire and collection are lock-free (no mutex, no waiting
// on another thread). A thread that stays pinned delays reclamation (memory
// grows) but never blocks anybody.
//
// Thread-safety: all functions may be called from any thread. Guards nest.

#ifndef IDEM_BACKENDS_MEMORY_SRC_EPOCH_H_
#define IDEM_BACKENDS_MEMORY_SRC_EPOCH_H_

#include <cstddef>
#include <cstdint>

namespace idem::epoch {

struct ThreadRecord;

// Pins the calling thread for the guard's lifetime: pointers loaded from the
// structure inside the guard stay valid until it is destroyed. Cheap (one
// thread_local lookup and one atomic exchange); must not outlive the scope
// that created it and must be destroyed by the thread that created it.
class Guard {
 public:
  Guard();
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  ThreadRecord* record_;
  // True when the thread's thread_local state was already destroyed (a call
  // made from another thread_local destructor at thread exit): the record is
  // then borrowed for this guard only.
  bool transient_;
};

using Deleter = void (*)(void*);

// Schedules `deleter(object)` for when no thread can still be reading
// `object`. Must be called inside a Guard, after `object` was made
// unreachable for new readers (its unlinking CAS succeeded). Never blocks;
// may run deleters of older objects that became safe.
void Retire(void* object, Deleter deleter);

template <typename T>
void Retire(T* object) {
  Retire(static_cast<void*>(object),
         [](void* p) { delete static_cast<T*>(p); });
}

// For tests and diagnostics.
struct DomainStats {
  std::uint64_t epoch = 0;
  std::size_t thread_records = 0;  // Ever created (reused ones count once).
  std::size_t thread_records_in_use = 0;
  std::size_t orphan_batches = 0;  // Retired by exited threads, not freed.
};
DomainStats GetStats();

// Tries to advance the epoch and frees everything that has become safe,
// including orphans. Must be called outside any Guard of the calling thread.
// Deterministic tests call it a few times in a row to force reclamation.
void Collect();

}  // namespace idem::epoch

#endif  // IDEM_BACKENDS_MEMORY_SRC_EPOCH_H_
