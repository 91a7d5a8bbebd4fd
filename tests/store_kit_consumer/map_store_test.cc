// The conformance kit on MapStore: every row of idem's store contract.

#include <idem/testing/store_contract.h>

#include <memory>

#include "map_store.h"

IDEM_STORE_CONTRACT_TEST(MapStore, [] { return std::make_shared<MapStore>(); });
