// The lost-race tests of a SQL store's claim (store.h, Store::Claim, "Lost
// races"), shared by the stores whose claim retries when the record it met
// vanished before it could read it (SQLite, PostgreSQL). A store's test
// hands over the store, how to set its claim-attempt hook (its test peer's
// SetClaimAttemptHook) and what changes its table behind the store's back,
// as another process would.

#ifndef IDEM_TESTS_SUPPORT_LOST_RACES_H_
#define IDEM_TESTS_SUPPORT_LOST_RACES_H_

#include <functional>
#include <utility>

#include "idem/internal/claim_attempt_hook.h"
#include "idem/store.h"

namespace idem::testing {

// Sets (or, with nullptr, clears) the store's claim-attempt hook.
using SetClaimAttemptHook = std::function<void(ClaimAttemptHook)>;

// What a test does to the store's table directly, each call with gtest
// assertions of its own.
struct RacingTable {
  std::function<void()> save;        // Copies every row aside.
  std::function<void()> restore;     // Inserts the copied rows again.
  std::function<void()> delete_all;  // Deletes every row.
};

// A claim that loses every race: another request's live record is in the
// way of each attempt's write, vanishes before the read and is back before
// the next write. Expects kInProgress (not an error) with locked_until the
// claim's `now` after exactly `claim_attempts` writes and reads, then, the
// hook cleared, a claim that acquires.
void ExpectEveryLostRaceIsInProgress(Store& store,
                                     const SetClaimAttemptHook& set_hook,
                                     int claim_attempts,
                                     const RacingTable& table);

// One lost race, then the key is free: the record in the way vanishes
// before the first read (`delete_all`); expects the retry to acquire, with
// no takeover, after one read.
void ExpectOneLostRaceThenAcquires(Store& store,
                                   const SetClaimAttemptHook& set_hook,
                                   const std::function<void()>& delete_all);

// The two above for a store type with kClaimAttempts and a test peer whose
// static SetClaimAttemptHook(store, hook) sets the hook (SqliteStore with
// SqliteStoreTestPeer, PostgresStore with PostgresStoreTestPeer).
template <typename Peer, typename SqlStore>
void ExpectEveryLostRaceIsInProgress(SqlStore& store,
                                     const RacingTable& table) {
  ExpectEveryLostRaceIsInProgress(
      store,
      [&store](ClaimAttemptHook hook) {
        Peer::SetClaimAttemptHook(store, std::move(hook));
      },
      SqlStore::kClaimAttempts, table);
}
template <typename Peer, typename SqlStore>
void ExpectOneLostRaceThenAcquires(SqlStore& store,
                                   const std::function<void()>& delete_all) {
  ExpectOneLostRaceThenAcquires(
      store,
      [&store](ClaimAttemptHook hook) {
        Peer::SetClaimAttemptHook(store, std::move(hook));
      },
      delete_all);
}

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_LOST_RACES_H_
