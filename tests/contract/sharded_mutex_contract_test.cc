// The store contract suite on ShardedMutexStore, the second implementation
// that keeps the suite honest, joined as a store written outside idem
// joins: a factory without a context, one macro.

#include <memory>

#include "baseline/sharded_mutex_store.h"
#include "idem/testing/store_contract.h"

IDEM_STORE_CONTRACT_TEST(ShardedMutex, [] {
  return std::make_shared<idem::bench::ShardedMutexStore>();
});
