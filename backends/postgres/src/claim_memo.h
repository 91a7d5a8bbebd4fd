// The fields of the claims a PostgreSQL store made, by token, so that their
// Complete is one statement.
//
// Encoding the completed record needs the claim's fingerprint, locked_until
// and expires_at. A token is fresh for every claim, so a row that still has
// it in progress has exactly the fields that claim wrote: a store that
// remembers them can send the completed record in one UPDATE. A claim it
// does not remember (made by another store instance, or evicted) costs a
// SELECT first.
//
// A direct-mapped table (a token is random, so its first bytes index it
// evenly) whose slot a newer claim simply overwrites. Fixed size and
// allocated once, so a claim neither allocates nor, with the striped locks,
// waits for claims of other slots, as it would behind a map with one lock.
//
// Thread-safety: every method may be called concurrently.

#ifndef IDEM_BACKENDS_POSTGRES_SRC_CLAIM_MEMO_H_
#define IDEM_BACKENDS_POSTGRES_SRC_CLAIM_MEMO_H_

#include <array>
#include <bit>
#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include "idem/clock.h"
#include "idem/types.h"

namespace idem::postgres_internal {

// The fields of a claim this store made, for a one-statement Complete.
struct ClaimFields {
  RecordId id;
  Fingerprint fingerprint;
  TimePoint locked_until;
  TimePoint expires_at;
};

class ClaimMemo {
 public:
  // Slots of the table (about 100 bytes each, allocated by the constructor).
  static constexpr std::size_t kSlots = 16384;

  ClaimMemo() : slots_(kSlots) {}

  // Remembers the claim of `token`, evicting the claim in its slot.
  void Remember(const Token& token, const ClaimFields& fields) {
    const std::size_t i = Index(token);
    std::lock_guard<std::mutex> lock(Stripe(i));
    slots_[i] = Slot{token, true, fields};
  }

  // The fields of the claim of `token`, if it is still remembered.
  std::optional<ClaimFields> Recall(const Token& token) {
    const std::size_t i = Index(token);
    std::lock_guard<std::mutex> lock(Stripe(i));
    const Slot& slot = slots_[i];
    if (!slot.used || slot.token != token) return std::nullopt;
    return slot.fields;
  }

  // Forgets the claim of `token` (completed or released).
  void Forget(const Token& token) {
    const std::size_t i = Index(token);
    std::lock_guard<std::mutex> lock(Stripe(i));
    Slot& slot = slots_[i];
    if (slot.used && slot.token == token) slot.used = false;
  }

 private:
  static_assert(std::has_single_bit(kSlots));
  static constexpr std::size_t kStripes = 64;

  struct Slot {
    Token token;
    bool used = false;
    ClaimFields fields;
  };

  static std::size_t Index(const Token& token) {
    return static_cast<std::size_t>(token.Prefix64()) & (kSlots - 1);
  }
  std::mutex& Stripe(std::size_t index) { return stripes_[index % kStripes]; }

  std::vector<Slot> slots_;
  std::array<std::mutex, kStripes> stripes_;
};

}  // namespace idem::postgres_internal

#endif  // IDEM_BACKENDS_POSTGRES_SRC_CLAIM_MEMO_H_
