#include "support/renewal_writes.h"

#include <chrono>

#include <gtest/gtest.h>

#include "support/store_times.h"

namespace idem::testing {

void ExpectOneRowWrittenPerRenewal(Store& store, const RecordId& id,
                                   const Fingerprint& fp,
                                   const std::function<void()>& count_writes,
                                   const std::function<std::string()>& writes) {
  auto claim = store.Claim(id, fp, kT0, kTtl, kLock);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  ASSERT_NO_FATAL_FAILURE(count_writes());
  constexpr int kRenewals = 10;
  for (int i = 1; i <= kRenewals; ++i) {
    auto renewed = store.ExtendLock(id, claim->token,
                                    kT0 + std::chrono::seconds(i), kLock);
    ASSERT_TRUE(renewed.has_value()) << renewed.error().ToString();
    ASSERT_TRUE(*renewed);
  }
  EXPECT_EQ(writes(), std::to_string(kRenewals));
  // A renewal that fails writes nothing.
  auto lost = store.ExtendLock(id, Token{}, kT0, kLock);
  ASSERT_TRUE(lost.has_value()) << lost.error().ToString();
  EXPECT_FALSE(*lost);
  EXPECT_EQ(writes(), std::to_string(kRenewals));
}

}  // namespace idem::testing
