// The memory store's bucket contents: an immutable array of {id, record,
// response} entries, allocated in one block with its header from the store's
// own memory (memory_record_memory.h; memory_block_cache.h serves the small
// ones).
//
// Records sit inline: a change costs one allocation (the new chain) and one
// retired object (the old chain), and chains are short (buckets >= capacity),
// so copying the neighbours' records is cheaper than extra indirections. A
// completed record's response is the entry's StoredResponse (the record's
// own `response` pointer stays null in a chain), shared between versions
// through its count. A chain is never modified once published: every change
// builds a new one (the With* functions) and publishes it with one CAS on its
// bucket.

#ifndef IDEM_BACKENDS_MEMORY_CHAIN_H_
#define IDEM_BACKENDS_MEMORY_CHAIN_H_

#include <atomic>
#include <cstddef>
#include <new>

#include "idem/record.h"
#include "idem/types.h"
#include "memory_block_cache.h"
#include "memory_hazard.h"
#include "memory_record_memory.h"
#include "memory_stored_response.h"

namespace idem::memory_internal {

struct Entry {
  RecordId id;
  Record record;  // record.response: always null (the response is below).
  StoredResponse response;  // Set exactly when the record is completed.
};

class Chain {
 public:
  // Entries are left for the caller to construct, every one of them, with
  // Emplace() before the chain is published or freed.
  static Chain* Make(std::size_t size) {
    void* mem = BlockCache::Take(size, Bytes(size));
    if (mem == nullptr) mem = RecordMemory::Allocate(Bytes(size));
    return ::new (mem) Chain(size);
  }
  // A Deleter for hazard::Retire and for chains that were never published.
  static void Free(void* p) {
    auto* chain = static_cast<Chain*>(p);
    const std::size_t size = chain->size_;
    for (std::size_t i = 0; i < size; ++i) chain->entries()[i].~Entry();
    chain->~Chain();
    if (!BlockCache::Put(size, p, Bytes(size))) {
      RecordMemory::Free(p, Bytes(size));
    }
  }

  std::size_t size() const { return size_; }
  const Entry& at(std::size_t i) const { return entries()[i]; }
  // Copying an Entry cannot throw (fixed arrays, time points, a null
  // shared_ptr, a counted StoredResponse), so a chain is never left
  // half-built.
  void Emplace(std::size_t i, const Entry& entry) {
    ::new (&entries()[i]) Entry(entry);
  }
  void Emplace(std::size_t i, const RecordId& id, const Record& record,
               const StoredResponse& response) {
    ::new (&entries()[i]) Entry{id, record, response};
  }

  // Index of `id`, or size() when absent.
  std::size_t Find(const RecordId& id) const {
    for (std::size_t i = 0; i < size_; ++i) {
      if (entries()[i].id == id) return i;
    }
    return size_;
  }

  // A copy of `chain` with entry `i` holding `record` and `response`.
  static Chain* WithReplaced(const Chain* chain, std::size_t i,
                             const Record& record,
                             const StoredResponse& response) {
    Chain* next = Make(chain->size_);
    for (std::size_t j = 0; j < chain->size_; ++j) {
      if (j == i) {
        next->Emplace(j, chain->at(j).id, record, response);
      } else {
        next->Emplace(j, chain->at(j));
      }
    }
    return next;
  }
  // A copy of `chain` (possibly null) with {id, record} added (no response).
  static Chain* WithAdded(const Chain* chain, const RecordId& id,
                          const Record& record) {
    const std::size_t n = chain == nullptr ? 0 : chain->size_;
    Chain* next = Make(n + 1);
    for (std::size_t j = 0; j < n; ++j) next->Emplace(j, chain->at(j));
    next->Emplace(n, id, record, StoredResponse());
    return next;
  }
  // A copy of `chain` without entry `i`; null when that leaves it empty.
  static Chain* WithRemoved(const Chain* chain, std::size_t i) {
    if (chain->size_ == 1) return nullptr;
    Chain* next = Make(chain->size_ - 1);
    std::size_t k = 0;
    for (std::size_t j = 0; j < chain->size_; ++j) {
      if (j != i) next->Emplace(k++, chain->at(j));
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
