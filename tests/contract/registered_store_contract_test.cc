// The store contract suite (idem/testing/store_contract.h) on one of
// idem's own stores, in every setup its descriptor lists
// (idem/store/store_descriptor.h): IDEM_CONTRACT_STORE names the backend;
// tests/contract/CMakeLists.txt builds one binary per registered backend.
// Each test opens a fresh store through OpenStore, next to the descriptor's
// local URI (an embedded store, in the test's directory) or on the server
// its setup's environment variable names (skipped without it, failed under
// CI), and removes what it left afterwards.

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "idem/clock.h"
#include "idem/open_store.h"
#include "idem/store/store_descriptor.h"
#include "idem/store_registry.h"
#include "idem/store_uri.h"
#include "idem/testing/status_matchers.h"
#include "idem/testing/store_contract.h"
#include "idem/testing/through_async_calls.h"

namespace {

using idem::testing::StoreFactory;
using idem::testing::StoreTestContext;

// The fresh store's URI for one test of `setup`: beside `base` (the
// server's URI), or in the test's directory.
std::string SetupUri(const idem::StoreDescriptor& store,
                     const idem::StoreTestSetup& setup, const std::string& base,
                     const StoreTestContext& context) {
  const std::string where = base.empty() ? store.local_uri(context.dir) : base;
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
               idem::OpenStore(SetupUri(*store, setup, base, context),
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
  // A setup whose store has asynchronous calls runs through them too
  // (`<label>_async`), so that every row claims and completes through
  // ClaimAsync and CompleteAsync, as the adapters do.
  const std::size_t n = out.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (store->setups[i].through_async_calls) {
      out.push_back(idem::testing::WithAsyncCalls({out[i]}).back());
    }
  }
  return out;
}

}  // namespace

IDEM_STORE_CONTRACT_TEST(Registered, RegisteredSetups(IDEM_CONTRACT_STORE));

namespace {

using idem::testing::HasErrorCode;

// The descriptor's parameter list is what OpenStore accepts: a parameter it
// does not list is refused before the store is opened (naming what the
// scheme takes), and every one it lists reaches the store's own reader
// (an embedded store's: a malformed value is then that reader's error, not
// an unknown parameter). A list that drifted from the readers fails here.
TEST(RegisteredStoreTest, DescriptorParametersAreWhatOpenStoreAccepts) {
  const idem::StoreDescriptor* store =
      idem::FindStoreByName(IDEM_CONTRACT_STORE);
  ASSERT_NE(store, nullptr);
  ASSERT_FALSE(store->schemes.empty());
  for (std::string_view scheme : store->schemes) {
    EXPECT_EQ(idem::FindStoreByScheme(scheme), store) << scheme;
    // A server store's URI is refused before any connection is tried.
    const std::string uri =
        store->local_uri != nullptr
            ? store->local_uri(std::filesystem::temp_directory_path() /
                               "idem-never-created")
            : std::string(scheme) + "://127.0.0.1/idem";
    auto bogus = idem::OpenStore(idem::WithUriParam(uri, "bogus_param", "1"));
    ASSERT_THAT(bogus, HasErrorCode(idem::ErrorCode::kInvalidArgument));
    const std::string message = bogus.error().message();
    EXPECT_NE(message.find("unknown parameter 'bogus_param'"),
              std::string::npos)
        << message;
    for (std::string_view parameter : store->parameters) {
      EXPECT_NE(message.find(std::string(parameter)), std::string::npos)
          << message << " does not name " << parameter;
    }
  }
  if (store->local_uri == nullptr) return;
  const std::filesystem::path nowhere =
      std::filesystem::temp_directory_path() / "idem-never-created";
  for (std::string_view parameter : store->parameters) {
    auto opened = idem::OpenStore(
        idem::WithUriParam(store->local_uri(nowhere), parameter, "%21%21"));
    ASSERT_THAT(opened, HasErrorCode(idem::ErrorCode::kInvalidArgument))
        << parameter;
    const std::string message = opened.error().message();
    EXPECT_EQ(message.find("unknown parameter"), std::string::npos)
        << parameter << ": " << message;
    EXPECT_NE(message.find(std::string(parameter)), std::string::npos)
        << parameter << ": " << message;
  }
  EXPECT_FALSE(std::filesystem::exists(nowhere));
}

}  // namespace
