// ClaimMemo: the fields of the claims a store made, by token, for store
// implementers whose Complete must write the whole completed record.
//
// Encoding a completed record needs the claim's fingerprint, locked_until
// and expires_at. A token is fresh for every claim, so a record that still
// holds it in progress has exactly the fields that claim wrote: a store that
// remembers them can write the completed record without reading it first. A
// claim it does not remember (made by another store instance, or evicted
// from the memo) costs the store a read.
//
// A direct-mapped table indexed by the token's first bytes: a newer claim
// whose token maps to an occupied slot overwrites it. Recall and Take match
// the token exactly but return whatever record id was remembered with it:
// the caller checks `id` against the record it completes.
//
// Success/failure: nothing fails but an allocation. The table is kept in
// one part per stripe (capacity / 64 slots, about 100 bytes each; fewer
// parts when the capacity is smaller), each allocated by the first Remember
// that lands in it; no other call allocates. So a store that is opened for
// a few claims (a test, an idemctl command) does not build and touch the
// whole table (1.6 MB by default), which under a sanitizer was most of what
// opening a store cost: ThreadSanitizer records every byte written, and
// the store contract suites open a store for each case. A store under
// steady load makes every part within its first few hundred claims.
// Thread-safety: every method may be called concurrently (striped locks: a
// call waits only for calls on slots of its stripe's part).

#ifndef IDEM_STORE_CLAIM_MEMO_H_
#define IDEM_STORE_CLAIM_MEMO_H_

#include <array>
#include <bit>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>

#include "idem/clock.h"
#include "idem/record.h"
#include "idem/types.h"

namespace idem {

// The fields of a claim a store made: what its Complete needs.
struct ClaimFields {
  RecordId id;
  Fingerprint fingerprint;
  TimePoint locked_until;
  TimePoint expires_at;
};

class ClaimMemo {
 public:
  // Slots of a memo constructed without a capacity.
  static constexpr std::size_t kDefaultCapacity = 16384;

  // A memo of `capacity` slots, rounded up to a power of two (at least 1).
  // Default: kDefaultCapacity.
  explicit ClaimMemo(std::size_t capacity = kDefaultCapacity)
      : capacity_(std::bit_ceil(capacity == 0 ? 1 : capacity)),
        part_shift_(std::countr_zero(capacity_ > kStripes ? capacity_ / kStripes
                                                          : std::size_t{1})) {}

  ClaimMemo(const ClaimMemo&) = delete;
  ClaimMemo& operator=(const ClaimMemo&) = delete;

  // Slots of the table (the capacity, rounded).
  std::size_t capacity() const { return capacity_; }

  // Remembers the claim of `token`, overwriting the claim in its slot.
  void Remember(const Token& token, const ClaimFields& fields) {
    const std::size_t i = Index(token);
    const std::size_t part = i >> part_shift_;
    std::lock_guard<std::mutex> lock(stripes_[part]);
    std::unique_ptr<Slot[]>& slots = parts_[part];
    if (!slots) slots = std::make_unique<Slot[]>(std::size_t{1} << part_shift_);
    slots[i & PartMask()] = Slot{token, true, fields};
  }

  // The fields of the claim of `token`, if it is still remembered.
  std::optional<ClaimFields> Recall(const Token& token) {
    const std::size_t i = Index(token);
    std::lock_guard<std::mutex> lock(stripes_[i >> part_shift_]);
    const Slot* slot = Find(i);
    if (slot == nullptr || !slot->used || slot->token != token) {
      return std::nullopt;
    }
    return slot->fields;
  }

  // The claim of `token` on `id` as the record it wrote (in progress, no
  // response: fingerprint, token, locked_until, expires_at), if it is still
  // remembered with that id: what its Complete encodes without a read.
  std::optional<Record> RecallRecord(const RecordId& id, const Token& token) {
    std::optional<ClaimFields> fields = Recall(token);
    if (!fields || fields->id != id) return std::nullopt;
    Record record;
    record.fingerprint = fields->fingerprint;
    record.token = token;
    record.locked_until = fields->locked_until;
    record.expires_at = fields->expires_at;
    return record;
  }

  // Forgets the claim of `token` (completed or released), if remembered.
  void Forget(const Token& token) { (void)Take(token); }

  // Recall and Forget in one step: the fields of the claim of `token`, if
  // still remembered, which is then forgotten.
  std::optional<ClaimFields> Take(const Token& token) {
    const std::size_t i = Index(token);
    std::lock_guard<std::mutex> lock(stripes_[i >> part_shift_]);
    Slot* slot = Find(i);
    if (slot == nullptr || !slot->used || slot->token != token) {
      return std::nullopt;
    }
    slot->used = false;
    return slot->fields;
  }

 private:
  static constexpr std::size_t kStripes = 64;

  struct Slot {
    Token token;
    bool used = false;
    ClaimFields fields;
  };

  // A token is random, so its first bytes spread claims evenly over the
  // slots, and so over the parts and their stripes.
  std::size_t Index(const Token& token) const {
    return static_cast<std::size_t>(token.Prefix64()) & (capacity_ - 1);
  }
  std::size_t PartMask() const { return (std::size_t{1} << part_shift_) - 1; }
  // The slot of `index`, or nullptr while its part holds no claim yet. The
  // caller holds the part's stripe.
  Slot* Find(std::size_t index) {
    Slot* slots = parts_[index >> part_shift_].get();
    return slots == nullptr ? nullptr : &slots[index & PartMask()];
  }

  const std::size_t capacity_;
  // Slots per part: 2^part_shift_; capacity_ >> part_shift_ parts, at most
  // kStripes. Part p is guarded by stripes_[p].
  const int part_shift_;
  std::array<std::unique_ptr<Slot[]>, kStripes> parts_;
  std::array<std::mutex, kStripes> stripes_;
};

}  // namespace idem

#endif  // IDEM_STORE_CLAIM_MEMO_H_
