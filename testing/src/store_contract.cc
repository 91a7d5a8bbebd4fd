// The store contract's fixture (StoreContractTest: SetUp, TearDown,
// OpenAgain) and the anchor that links the suite's files into every binary
// that instantiates it; see idem/testing/store_contract.h. The rows, by
// contract area, in the order they run (testing/CMakeLists.txt):
//   store_contract_claim.cc         the claim table, row by row, and replays
//   store_contract_complete.cc      Complete, CompleteShared and Release
//   store_contract_revoke.cc        Revoke, expiry and Inspect
//   store_contract_purge.cc         PurgeExpired and the Sweeper over it
//   store_contract_arguments.cc     bad durations, and Info
//   store_contract_concurrency.cc   racing claims, takeovers, completions
//   store_contract_random.cc        the random workload from many threads
//   store_contract_capabilities.cc  what StoreInfo's capabilities allow
//   store_contract_renewal.cc       ExtendLock and Stats
// Shared helpers: store_contract_util.h.
//
// Time: every call passes an explicit TimePoint derived from the fixture's
// ManualClock, so expiry and lock timeouts are exact and nothing sleeps.
// Concurrency tests start their threads on a std::barrier so that the calls
// under test really overlap, and keep every loop bounded.

#include "idem/testing/store_contract.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <system_error>
#include <utility>

#include "idem/clock.h"
#include "idem/testing/status_matchers.h"
#include "idem/token.h"
#include "store_contract_util.h"

namespace idem::testing {

int internal::StoreContractAnchor() {
  return contract::ClaimContractAnchor() + contract::CompleteContractAnchor() +
         contract::RevokeContractAnchor() + contract::PurgeContractAnchor() +
         contract::ArgumentsContractAnchor() +
         contract::ConcurrencyContractAnchor() +
         contract::RandomContractAnchor() + contract::RenewalContractAnchor() +
         contract::CapabilityContractAnchor() +
         contract::TryClaimContractAnchor() + contract::AsyncContractAnchor();
}

std::string StoreFactoryName(
    const ::testing::TestParamInfo<StoreFactory>& info) {
  return info.param.name;
}

void PrintTo(const StoreFactory& factory, std::ostream* os) {
  *os << "StoreFactory{" << factory.name << "}";
}

namespace {

std::string UniqueName() {
  static std::atomic<std::uint64_t> counter{0};
  const Token salt = NewToken();
  std::string name = "idemct_" + std::to_string(::getpid()) + "_" +
                     std::to_string(counter.fetch_add(1)) + "_" +
                     salt.ToHex().substr(0, 8);
  return name;
}

}  // namespace

void StoreContractTest::SetUp() {
  const StoreFactory& factory = GetParam();
  if (!factory.skip_reason.empty()) {
    // A developer without the server may skip; CI must not pass silently
    // without it.
    if (std::getenv("CI") != nullptr) FAIL() << factory.skip_reason;
    GTEST_SKIP() << factory.skip_reason;
  }
  ASSERT_TRUE(factory.open)
      << "StoreFactory " << factory.name << " has no open";

  std::string pattern =
      (std::filesystem::temp_directory_path() / "idem-contract-XXXXXX")
          .string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << "mkdtemp " << pattern;
  context_.dir = pattern;
  context_.unique_name = UniqueName();
  context_.clock = std::make_shared<ManualClock>();

  auto opened = factory.open(context_);
  ASSERT_THAT(opened, IsOk()) << factory.name;
  ASSERT_NE(*opened, nullptr);
  store_ = std::move(*opened);
}

Result<std::shared_ptr<Store>> StoreContractTest::OpenAgain() {
  return GetParam().open(context_);
}

void StoreContractTest::TearDown() {
  store_.reset();
  const StoreFactory& factory = GetParam();
  if (context_.dir.empty()) return;  // Skipped, or SetUp failed early.
  if (factory.cleanup) factory.cleanup(context_);
  std::error_code ec;
  std::filesystem::remove_all(context_.dir, ec);
}

}  // namespace idem::testing
