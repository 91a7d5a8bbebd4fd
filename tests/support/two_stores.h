// The start of the tests of two store objects on one file or table (the
// stores that share their records across processes: SQLite, PostgreSQL):
// both opened, and an id claimed through the first.
//
//   testing::TwoStores two;
//   ASSERT_NO_FATAL_FAILURE(
//       testing::OpenTwoAndClaim([&] { return Open(); }, Id(1), Fp(1), &two));
//   auto& [a, b, claim] = two;

#ifndef IDEM_TESTS_SUPPORT_TWO_STORES_H_
#define IDEM_TESTS_SUPPORT_TWO_STORES_H_

#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include "idem/error.h"
#include "idem/store.h"
#include "idem/types.h"
#include "support/store_times.h"

namespace idem::testing {

struct TwoStores {
  std::unique_ptr<Store> a;
  std::unique_ptr<Store> b;
  Result<ClaimResult> claim;  // Of the id, through a, at kT0.
};

// Opens two stores with `open` (on the same file or table each time) into
// `out` and claims `id` with `fp` through the first; a fatal failure when a
// store does not open or the claim fails.
inline void OpenTwoAndClaim(const std::function<std::unique_ptr<Store>()>& open,
                            const RecordId& id, const Fingerprint& fp,
                            TwoStores* out) {
  out->a = open();
  out->b = open();
  ASSERT_NE(out->a, nullptr);
  ASSERT_NE(out->b, nullptr);
  out->claim = out->a->Claim(id, fp, kT0, kTtl, kLock);
  ASSERT_TRUE(out->claim.has_value()) << out->claim.error().ToString();
}

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_TWO_STORES_H_
