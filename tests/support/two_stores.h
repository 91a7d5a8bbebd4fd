// The start of the tests of two store objects on one file or table (the
// stores that share their records across processes: SQLite, PostgreSQL):
// both opened, and an id claimed through the first.
//
//   testing::TwoStores two;
//   ASSERT_NO_FATAL_FAILURE(
//       testing::OpenTwoAndClaim([&] { return Open(); }, Id(1), Fp(1), &two));
//   auto& [a, b, claim] = two;
//
// And two such tests both stores run, for a store that remembers its claims
// (idem/store/claim_memo.h): its memory must never outweigh the row.

#ifndef IDEM_TESTS_SUPPORT_TWO_STORES_H_
#define IDEM_TESTS_SUPPORT_TWO_STORES_H_

#include <chrono>
#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include "idem/error.h"
#include "idem/response.h"
#include "idem/store.h"
#include "idem/types.h"
#include "support/ids.h"
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

// A claim of `a` completed through `b` (which reads the row), then through
// `a`, which remembers the claim: nothing, the row is completed; a claim of
// `a` released through `b`, then completed through `a`: nothing either.
inline void ExpectAClaimOfAnotherStoreCanBeCompletedAndReleased(
    const std::function<std::unique_ptr<Store>()>& open) {
  TwoStores two;
  ASSERT_NO_FATAL_FAILURE(
      OpenTwoAndClaim(open, TestId(1), TestFingerprint(1), &two));
  auto& [a, b, claim] = two;
  auto done = b->Complete(TestId(1), claim->token, Response{201, {}, "from b"});
  ASSERT_TRUE(done.has_value() && *done);
  done = a->Complete(TestId(1), claim->token, Response{201, {}, "from a"});
  ASSERT_TRUE(done.has_value());
  EXPECT_FALSE(*done);
  auto replay = a->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(replay.has_value());
  ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(replay->response->body, "from b");

  claim = a->Claim(TestId(2), TestFingerprint(2), kT0, kTtl, kLock);
  ASSERT_TRUE(claim.has_value());
  auto released = b->Release(TestId(2), claim->token);
  ASSERT_TRUE(released.has_value() && *released);
  done = a->Complete(TestId(2), claim->token, Response{201, {}, "late"});
  ASSERT_TRUE(done.has_value());
  EXPECT_FALSE(*done);
}

// `a` remembers its claim's locked_until for a one-statement Complete; a
// renewal through `b` moved it since. The completed record must still agree
// with its columns (readable, not kDataLoss).
inline void ExpectACompleteAfterARenewalElsewhereStaysReadable(
    const std::function<std::unique_ptr<Store>()>& open) {
  TwoStores two;
  ASSERT_NO_FATAL_FAILURE(
      OpenTwoAndClaim(open, TestId(1), TestFingerprint(1), &two));
  auto& [a, b, claim] = two;
  auto renewed = b->ExtendLock(TestId(1), claim->token,
                               kT0 + std::chrono::seconds(5), kLock);
  ASSERT_TRUE(renewed.has_value() && *renewed);
  auto done =
      a->Complete(TestId(1), claim->token, Response{201, {}, "renewed"});
  ASSERT_TRUE(done.has_value()) << done.error().ToString();
  EXPECT_TRUE(*done);
  auto replay = b->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
  ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(replay->response->body, "renewed");
}

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_TWO_STORES_H_
