// Test bodies the single-process durable stores (RocksDB, SQLite) share
// beyond the contract suite: what a reopen must keep and what every call on
// a damaged record must answer (the Redis store's tests use the latter
// too). With gtest assertions inside; times are
// those of store_times.h, ids and fingerprints those of ids.h.

#ifndef IDEM_TESTS_SUPPORT_DURABLE_STORE_H_
#define IDEM_TESTS_SUPPORT_DURABLE_STORE_H_

#include <functional>
#include <memory>
#include <string>

#include "idem/response.h"
#include "idem/store.h"
#include "idem/types.h"

namespace idem::testing {

// A 201 with two headers and a body holding a NUL and a 0xff byte, so that
// a store that loses bytes or headers shows it.
Response SomeResponse();

// Opens the store on the same files each time it is called.
using OpenDurableStore = std::function<std::unique_ptr<Store>()>;

// TestId(1) claimed and TestId(2) claimed and completed (SomeResponse()),
// then the store closed and opened again: 1 is still in progress with its
// token and times, a claim of it answers kInProgress, 2 replays its
// response, and the token from before the reopen still completes 1.
void ExpectReopeningKeepsInProgressAndCompletedRecords(
    const OpenDurableStore& open);

// Claim, Inspect, Complete (with `token`) and ExtendLock of the damaged
// record `id` each fail with kDataLoss; the Claim's message names the id
// and `path` (the store's file or directory, or its server), so an
// operator can find it.
void ExpectDataLossOnEveryCall(Store& store, const RecordId& id,
                               const Token& token, const std::string& path);

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_DURABLE_STORE_H_
