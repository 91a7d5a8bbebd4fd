// The store contract suite, idem's conformance kit for stores: the claim
// table and store operations of SEMANTICS.md, checked against any Store by
// the same GoogleTest cases. A store joins with one line in a test binary
// that links idem::testing (find_package(idem COMPONENTS testing)) and
// GTest::gtest_main:
//
//   #include <idem/testing/store_contract.h>
//   IDEM_STORE_CONTRACT_TEST(MyStore, [] { return MyStore::Open(MyOptions{});
//   });
//
// The factory is called once per test and must return a fresh, empty store:
// an idem::Result of a smart pointer to it (or the pointer itself). A
// factory that takes a `const idem::testing::StoreTestContext&` gets a
// fresh directory and a unique name for the test; called again with the
// same context it must open the same store again (the suite's rows on
// durable and shared stores reopen it). A store that needs a server takes
// it from the environment and gives the suite a skip reason without it
// (StoreFactory::skip_reason); under CI (the CI environment variable set) a
// skip reason fails the test instead.
//
// What runs: every row the store's Info() allows. A row that needs a
// capability the store lacks (StoreInfo::durable,
// shared_across_processes, a Stats() that counts) is skipped with
// GTEST_SKIP, and the message names the capability.
//
// Time: the suite takes time only from explicit TimePoints (a ManualClock
// it owns), never from the system clock, and never sleeps. It compares
// responses by value, so a store may hand back a fresh object decoded from
// disk on every call. A store must not start work that deletes records on
// its own (a sweeper): the suite counts what PurgeExpired deletes.
//
// Thread-safety: the concurrency rows call one Store from up to 32 threads
// at once; that is what they test.

#ifndef IDEM_TESTING_STORE_CONTRACT_H_
#define IDEM_TESTING_STORE_CONTRACT_H_

#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/store.h"

namespace idem::testing {

// What the suite hands a factory for one test.
struct StoreTestContext {
  // A fresh, empty directory that the suite deletes after the test (after the
  // store is destroyed). File-based stores keep their files here.
  std::filesystem::path dir;
  // Unique in this process and across processes running at once; lowercase
  // letters, digits and '_' only, starts with a letter. Shared-server
  // stores use it as a table name or key prefix.
  std::string unique_name;
  // The test's clock. The suite's own calls pass explicit TimePoints taken
  // from it; a store's background work should get a clock of its own that
  // does not move, so that only PurgeExpired deletes records.
  std::shared_ptr<ManualClock> clock;
};

// One store setup as the suite sees it.
struct StoreFactory {
  // Test-name suffix: letters, digits and '_' only.
  std::string name;
  // Opens the store of `context`: fresh and empty the first time.
  std::function<Result<std::shared_ptr<Store>>(const StoreTestContext&)> open;
  // Whether `open`, called again with the same context, opens the same
  // store (true for a factory that takes the context).
  bool reopens = false;
  // Optional: run after the store of a test is destroyed (drop a table, ...).
  std::function<void(const StoreTestContext&)> cleanup;
  // When not empty every test of this setup is skipped with this message:
  // e.g. "IDEM_TEST_POSTGRES_URI not set".
  std::string skip_reason;
};

// Names instantiations by StoreFactory::name.
std::string StoreFactoryName(
    const ::testing::TestParamInfo<StoreFactory>& info);

// gtest prints the parameter of a failing test with this.
void PrintTo(const StoreFactory& factory, std::ostream* os);

class StoreContractTest : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override;
  void TearDown() override;

  Store& store() { return *store_; }
  ManualClock& clock() { return *context_.clock; }
  TimePoint Now() const { return context_.clock->Now(); }
  const std::shared_ptr<ManualClock>& shared_clock() const {
    return context_.clock;
  }
  // Rows on durable and shared stores: the store of this test opened again
  // (the factory called with the same context). Skips the row, naming the
  // capability, unless the factory reopens.
  Result<std::shared_ptr<Store>> OpenAgain();
  // Closes the store of this test (before OpenAgain, to reopen it).
  void CloseStore() { store_.reset(); }
  // Replaces the store of this test (after CloseStore and OpenAgain).
  void UseStore(std::shared_ptr<Store> store) { store_ = std::move(store); }

 private:
  StoreTestContext context_;
  std::shared_ptr<Store> store_;
};

namespace internal {
// Defined in store_contract.cc, next to the fixture; it calls one anchor in
// each of the suite's files. Referencing it from every instantiation keeps
// the linker from dropping those object files (and so every TEST_P) out of
// the static library.
int StoreContractAnchor();

template <typename T>
struct IsResult : std::false_type {};
template <typename T>
struct IsResult<Result<T>> : std::true_type {};

// A factory's answer as the suite holds it.
template <typename Opened>
Result<std::shared_ptr<Store>> ToSharedStore(Opened opened) {
  if constexpr (IsResult<Opened>::value) {
    if (!opened) return tl::unexpected(opened.error());
    return std::shared_ptr<Store>(std::move(*opened));
  } else {
    return std::shared_ptr<Store>(std::move(opened));
  }
}
}  // namespace internal

// The setups IDEM_STORE_CONTRACT_TEST(name, ...) runs: a factory with or
// without a StoreTestContext parameter, a StoreFactory, or a list of them.
template <typename Factory>
std::vector<StoreFactory> ContractSetups(std::string_view name,
                                         Factory factory) {
  StoreFactory setup{.name = std::string(name)};
  if constexpr (std::is_invocable_v<Factory&, const StoreTestContext&>) {
    setup.open = [factory](const StoreTestContext& context) mutable {
      return internal::ToSharedStore(factory(context));
    };
    setup.reopens = true;
  } else {
    setup.open = [factory](const StoreTestContext&) mutable {
      return internal::ToSharedStore(factory());
    };
  }
  return {std::move(setup)};
}
inline std::vector<StoreFactory> ContractSetups(std::string_view,
                                                StoreFactory setup) {
  return {std::move(setup)};
}
inline std::vector<StoreFactory> ContractSetups(
    std::string_view, std::vector<StoreFactory> setups) {
  return setups;
}

}  // namespace idem::testing

// Runs the whole suite on one store. `name` is an identifier (MyStore); the
// rest is the factory (see ContractSetups). Use at namespace scope (any
// namespace), once per name per binary. Tests are named
// <name>/StoreContractTest.<Row>/<setup name>.
#define IDEM_STORE_CONTRACT_TEST(name, ...)                             \
  using ::idem::testing::StoreContractTest;                             \
  INSTANTIATE_TEST_SUITE_P(                                             \
      name, StoreContractTest,                                          \
      ::testing::ValuesIn(                                              \
          ::idem::testing::ContractSetups(#name, __VA_ARGS__)),         \
      ::idem::testing::StoreFactoryName);                               \
  [[maybe_unused]] static const int idem_store_contract_anchor_##name = \
      ::idem::testing::internal::StoreContractAnchor()

#endif  // IDEM_TESTING_STORE_CONTRACT_H_
