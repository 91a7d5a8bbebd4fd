// The store contract suite (idem/testing/store_contract.h) on one of
// idem's own stores, in every setup its descriptor lists
// (idem/store/store_descriptor.h): IDEM_CONTRACT_STORE names the backend;
// tests/contract/CMakeLists.txt builds one binary per registered backend.
// Each test opens a fresh store through OpenStore, next to the descriptor's
// local URI (an embedded store, in the test's directory) or on the server
// its setup's environment variable names (skipped without it, failed under
// CI), and removes what it left afterwards.

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.h"
#include "idem/open_store.h"
#include "idem/store/store_descriptor.h"
#include "idem/store_registry.h"
#include "idem/store_uri.h"
#include "idem/testing/store_contract.h"

namespace {

using idem::testing::StoreFactory;
using idem::testing::StoreTestContext;

// The fresh store's URI for one test of `setup`: beside `base` (the
// server's URI), or in the test's directory.
std::string SetupUri(const idem::StoreDescriptor& store,
                     const idem::StoreTestSetup& setup,
                     const std::string& base, const StoreTestContext& context) {
  const std::string where =
      base.empty() ? store.local_uri(context.dir) : base;
  return idem::WithUriParams(store.fresh_uri(where, context.unique_name),
                             setup.params);
}

std::vector<StoreFactory> RegisteredSetups(std::string_view name) {
  const idem::StoreDescriptor* store = idem::FindStoreByName(name);
  if (store == nullptr) {
    return {{.name = "unregistered",
             .open = [name](const StoreTestContext&)
                 -> idem::Result<std::shared_ptr<idem::Store>> {
               return idem::MakeError(
                   idem::ErrorCode::kInvalidArgument,
                   "no registered store named " + std::string(name));
             }}};
  }
  std::vector<StoreFactory> out;
  for (const idem::StoreTestSetup& setup : store->setups) {
    std::string base, skip;
    if (!setup.server_env.empty()) {
      const char* value = std::getenv(std::string(setup.server_env).c_str());
      if (value != nullptr) base = value;
      if (base.empty()) {
        skip = std::string(setup.server_env) +
               " not set: the URI of the test server (scripts/test.sh "
               "starts one; docs/ARCHITECTURE.md, \"Tests\")";
      }
    }
    out.push_back(
        {.name = std::string(setup.label),
         .open = [store, setup, base](const StoreTestContext& context)
             -> idem::Result<std::shared_ptr<idem::Store>> {
           // No sweeper: the suite counts what PurgeExpired deletes. The
           // store's background work (RocksDB's compaction filter) gets a
           // clock that never moves, so that only PurgeExpired deletes.
           IDEM_ASSIGN_OR_RETURN(
               auto opened,
               idem::OpenStore(
                   SetupUri(*store, setup, base, context),
                   {.clock = std::make_shared<idem::ManualClock>(),
                    .sweep_interval = idem::Duration::zero()}));
           return std::shared_ptr<idem::Store>(std::move(opened));
         },
         // Whatever outlives a store object is there to reopen.
         .reopens = store->remove != nullptr,
         .cleanup =
             [store, setup, base](const StoreTestContext& context) {
               if (store->remove != nullptr) {
                 store->remove(SetupUri(*store, setup, base, context));
               }
             },
         .skip_reason = skip});
  }
  return out;
}

}  // namespace

IDEM_STORE_CONTRACT_TEST(Registered, RegisteredSetups(IDEM_CONTRACT_STORE));
