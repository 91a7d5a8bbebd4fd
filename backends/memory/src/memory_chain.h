// The memory store's bucket contents: an immutable array of {id, record}
// entries, allocated in one block with its header (memory_block_cache.h serves
// the small ones).
//
// Records sit inline: a change costs one allocation (the new chain) and one
// retired object (the old chain), and chains are short (buckets >= capacity),
// so copying the neighbours' records is cheaper than extra indirections. A
// stored response is shared between versions through its shared_ptr. A chain
// is never modified once published: every change builds a new one (the With*
// functions) and publishes it with one CAS on its bucket.

#ifndef IDEM_BACKENDS_MEMORY_CHAIN_H_
#define IDEM_BACKENDS_MEMORY_CHAIN_H_

#include <atomic>
#include <cstddef>
#include <new>

#include "idem/record.h"
#include "idem/types.h"
#include "memory_block_cache.h"
#include "memory_hazard.h"

namespace idem::memory_internal {

struct Entry {
  RecordId id;
  Record record;
};

class Chain {
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

// Replaces `cur` in `bucket` with `next` (null: the bucket empties) with one
// CAS: on success retires `cur` to the hazard scheme (its readers may still
// hold it); on failure frees `next`, which was never published.
inline bool Publish(std::atomic<Chain*>& bucket, Chain* cur, Chain* next) {
  Chain* expected = cur;
  if (bucket.compare_exchange_strong(expected, next, std::memory_order_seq_cst,
                                     std::memory_order_relaxed)) {
    if (cur != nullptr) hazard::Retire(cur, &Chain::Free);
    return true;
  }
  if (next != nullptr) Chain::Free(next);
  return false;
}

}  // namespace idem::memory_internal

#endif  // IDEM_BACKENDS_MEMORY_CHAIN_H_
