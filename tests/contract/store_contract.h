// The store contract suite: the claim table and store operations of
// SEMANTICS.md, checked against every Store backend by the same tests.
//
// A backend joins with one line in a test file linked against
// idem_store_contract (tests/contract/CMakeLists.txt has
// idem_add_store_contract_test() for that):
//
//   IDEM_INSTANTIATE_STORE_CONTRACT(Memory, idem::testing::StoreFactory{
//       .name = "memory",
//       .open = [](const idem::testing::StoreTestContext&) { ... }});
//
// A backend that needs a server takes it from the environment and skips
// without it (RocksDB's env_basic_test does the same) — except under CI
// (the CI environment variable set), where a missing server fails the test:
//
//   const char* uri = std::getenv("IDEM_TEST_POSTGRES_URI");
//   IDEM_INSTANTIATE_STORE_CONTRACT(Postgres, idem::testing::StoreFactory{
//       .name = "postgres",
//       .open = ...,  // ?table=<context.unique_name>
//       .cleanup = ...,  // DROP TABLE <context.unique_name>
//       .skip_reason = uri ? "" : "IDEM_TEST_POSTGRES_URI not set"});
//
// Each test opens its own store through the factory, in its own empty
// directory and with its own unique name, so durable backends never see
// another test's records. The suite takes time only from explicit TimePoints
// (a ManualClock it owns), never from the system clock, and never sleeps.
// It compares responses by value only, so a backend may hand back a fresh
// object decoded from disk on every call.
//
// Thread-safety: the suite's concurrency tests call one Store from up to 32
// threads at once; that is what they test.

#ifndef IDEM_TESTS_CONTRACT_STORE_CONTRACT_H_
#define IDEM_TESTS_CONTRACT_STORE_CONTRACT_H_

#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/store.h"

namespace idem::testing {

// What the suite hands a factory for one test.
struct StoreTestContext {
  // A fresh, empty directory that the suite deletes after the test (after the
  // store is destroyed). File-based backends keep their files here.
  std::filesystem::path dir;
  // Unique in this process and across processes running at once; lowercase
  // letters, digits and '_' only, starts with a letter. Shared-server
  // backends use it as a table name or key prefix.
  std::string unique_name;
  // The test's clock, for a backend that runs background work. The suite's
  // own calls pass explicit TimePoints taken from it.
  std::shared_ptr<ManualClock> clock;
};

// One backend as the suite sees it.
struct StoreFactory {
  // Test-name suffix: letters, digits and '_' only.
  std::string name;
  // Opens a fresh, empty store for one test. It must not start work that
  // deletes records on its own (a sweeper, a compaction that purges), since
  // the suite counts what PurgeExpired deletes.
  std::function<Result<std::unique_ptr<Store>>(const StoreTestContext&)> open;
  // Optional: run after the store of a test is destroyed (drop a table, ...).
  std::function<void(const StoreTestContext&)> cleanup;
  // When not empty every test of this instantiation is skipped with this
  // message: e.g. "IDEM_TEST_POSTGRES_URI not set".
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

 private:
  StoreTestContext context_;
  std::unique_ptr<Store> store_;
};

namespace internal {
// Defined in store_contract.cc next to the tests. Referencing it from every
// instantiation keeps the linker from dropping that object file (and so every
// TEST_P) out of the static library.
int StoreContractAnchor();
// Defined in store_contract_renewal.cc; StoreContractAnchor calls it, for
// the same reason.
int RenewalContractAnchor();
}  // namespace internal

}  // namespace idem::testing

// Instantiates the whole suite for one backend. `prefix` is an identifier
// (Memory, Rocksdb, ...); the rest is an expression of type StoreFactory.
// Use at namespace scope, once per prefix per binary.
#define IDEM_INSTANTIATE_STORE_CONTRACT(prefix, ...)                          \
  namespace idem::testing {                                                   \
  INSTANTIATE_TEST_SUITE_P(prefix, StoreContractTest,                         \
                           ::testing::Values(__VA_ARGS__), StoreFactoryName); \
  [[maybe_unused]] static const int idem_store_contract_anchor_##prefix =     \
      internal::StoreContractAnchor();                                        \
  }                                                                           \
  static_assert(true, "")

#endif  // IDEM_TESTS_CONTRACT_STORE_CONTRACT_H_
