// The store contract suite through a store's asynchronous calls
// (Store::ClaimAsync, CompleteAsync; StoreInfo::async_calls): every row
// that claims or completes then exercises them, on the same setups.
//
//   IDEM_STORE_CONTRACT_TEST(MyStore, idem::testing::WithAsyncCalls(
//       idem::testing::ContractSetups("MyStore", [] { return Open(); })));
//
// runs the suite on each setup as it is and again as `<name>_async`. A
// store whose asynchronous calls are its synchronous ones (Store's
// defaults) passes the second run trivially; one that answers on a thread
// of its own must give the same answers and effects there.
//
// Thread-safety: as the inner store's.

#ifndef IDEM_TESTING_THROUGH_ASYNC_CALLS_H_
#define IDEM_TESTING_THROUGH_ASYNC_CALLS_H_

#include <chrono>
#include <memory>
#include <vector>

#include "idem/store.h"
#include "idem/testing/store_contract.h"

namespace idem::testing {

// A Store over `inner` whose Claim is inner's ClaimAsync and whose Complete
// and CompleteShared are its CompleteAsync, each waited for: at most
// `wait`, then a kInternal error naming the call (a store that never
// answers fails the row instead of hanging it). An answer that comes twice
// for one call fails the running test (ADD_FAILURE). Every other call, and
// Info(), are inner's. Default wait: 60 s.
std::shared_ptr<Store> ThroughAsyncCalls(
    std::shared_ptr<Store> inner,
    std::chrono::milliseconds wait = std::chrono::seconds(60));

// `setups`, then a copy of each that opens ThroughAsyncCalls(its store),
// named `<name>_async`.
std::vector<StoreFactory> WithAsyncCalls(std::vector<StoreFactory> setups);

}  // namespace idem::testing

#endif  // IDEM_TESTING_THROUGH_ASYNC_CALLS_H_
