// ClaimMemo (claim_memo.h): remember, recall, forget and take by token; a
// newer claim overwrites its slot; the record id comes back for the caller
// to check; concurrent use.

#include "idem/store/claim_memo.h"

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "idem/token.h"

namespace idem {
namespace {

RecordId Id(std::uint8_t n) {
  RecordId id;
  id.bytes.fill(n);
  return id;
}

// A token whose slot index (its first 8 bytes) is `index`, told apart from
// others of the same slot by `tag`.
Token TokenAt(std::uint64_t index, std::uint8_t tag) {
  Token t;
  t.bytes.fill(tag);
  for (int i = 0; i < 8; ++i) {
    t.bytes[i] = static_cast<std::uint8_t>(index >> (8 * i));
  }
  return t;
}

ClaimFields Fields(std::uint8_t n) {
  ClaimFields f;
  f.id = Id(n);
  f.fingerprint.bytes.fill(static_cast<std::uint8_t>(n + 1));
  f.locked_until = FromUnixNanos(1'000 * n);
  f.expires_at = FromUnixNanos(2'000 * n);
  return f;
}

void ExpectSame(const ClaimFields& want, const ClaimFields& got) {
  EXPECT_EQ(want.id, got.id);
  EXPECT_EQ(want.fingerprint, got.fingerprint);
  EXPECT_EQ(want.locked_until, got.locked_until);
  EXPECT_EQ(want.expires_at, got.expires_at);
}

TEST(ClaimMemoTest, CapacityRoundsUpToAPowerOfTwo) {
  EXPECT_EQ(ClaimMemo().capacity(), ClaimMemo::kDefaultCapacity);
  EXPECT_EQ(ClaimMemo(1000).capacity(), 1024u);
  EXPECT_EQ(ClaimMemo(1024).capacity(), 1024u);
  EXPECT_EQ(ClaimMemo(0).capacity(), 1u);
}

TEST(ClaimMemoTest, RecallsWhatItRemembersUntilForgotten) {
  ClaimMemo memo;
  const Token token = NewToken();
  EXPECT_FALSE(memo.Recall(token).has_value());
  memo.Remember(token, Fields(3));
  auto got = memo.Recall(token);
  ASSERT_TRUE(got.has_value());
  ExpectSame(Fields(3), *got);
  ASSERT_TRUE(memo.Recall(token).has_value()) << "Recall does not forget";
  memo.Forget(token);
  EXPECT_FALSE(memo.Recall(token).has_value());
  memo.Forget(token);  // Forgetting what is not there is harmless.
}

TEST(ClaimMemoTest, TakeRecallsOnceAndForgets) {
  ClaimMemo memo;
  const Token token = NewToken();
  EXPECT_FALSE(memo.Take(token).has_value());
  memo.Remember(token, Fields(5));
  auto got = memo.Take(token);
  ASSERT_TRUE(got.has_value());
  ExpectSame(Fields(5), *got);
  EXPECT_FALSE(memo.Take(token).has_value());
  EXPECT_FALSE(memo.Recall(token).has_value());
}

TEST(ClaimMemoTest, ANewerClaimOverwritesItsSlot) {
  ClaimMemo memo(16);
  const Token older = TokenAt(7, 0x11);
  const Token newer = TokenAt(7 + 16, 0x22);  // Same slot: index mod 16.
  const Token other = TokenAt(8, 0x33);
  memo.Remember(older, Fields(1));
  memo.Remember(other, Fields(2));
  memo.Remember(newer, Fields(3));
  EXPECT_FALSE(memo.Recall(older).has_value());
  EXPECT_FALSE(memo.Take(older).has_value());
  memo.Forget(older);  // Must not forget the newer claim of the slot.
  auto got = memo.Recall(newer);
  ASSERT_TRUE(got.has_value());
  ExpectSame(Fields(3), *got);
  auto kept = memo.Recall(other);
  ASSERT_TRUE(kept.has_value()) << "another slot is untouched";
  ExpectSame(Fields(2), *kept);
}

TEST(ClaimMemoTest, EverySlotHoldsAClaimWhateverTheCapacity) {
  // The table is kept in parts, one per stripe, made at their first claim:
  // below, at and above one slot per stripe, every slot (the first and
  // last of each part included) keeps its own claim, and a token no claim
  // was remembered with finds nothing in a part not made yet.
  for (const std::size_t capacity : {1u, 16u, 64u, 1024u}) {
    ClaimMemo memo(capacity);
    EXPECT_FALSE(memo.Recall(TokenAt(capacity - 1, 0x77)).has_value());
    EXPECT_FALSE(memo.Take(TokenAt(0, 0x77)).has_value());
    for (std::size_t i = 0; i < capacity; ++i) {
      memo.Remember(TokenAt(i, 0x55), Fields(static_cast<std::uint8_t>(i)));
    }
    for (std::size_t i = 0; i < capacity; ++i) {
      auto got = memo.Take(TokenAt(i, 0x55));
      ASSERT_TRUE(got.has_value()) << "capacity " << capacity << ", slot " << i;
      ExpectSame(Fields(static_cast<std::uint8_t>(i)), *got);
      EXPECT_FALSE(memo.Recall(TokenAt(i, 0x55)).has_value());
    }
  }
}

TEST(ClaimMemoTest, ATokenOfAnotherIdFailsTheCallersCheck) {
  // The memo matches tokens, not ids: a Complete of id B with the token of
  // a claim of id A gets A's fields and must not use them.
  ClaimMemo memo;
  const Token token = NewToken();
  memo.Remember(token, Fields(1));
  auto got = memo.Take(token);
  ASSERT_TRUE(got.has_value());
  EXPECT_NE(got->id, Id(2));
  EXPECT_EQ(got->id, Id(1));
}

TEST(ClaimMemoTest, EightThreadsRememberAndTakeTheirOwnClaims) {
  // Fewer slots than claims in flight, so threads share slots and stripes:
  // a take returns the fields of its own token or nothing, never another's.
  ClaimMemo memo(256);
  constexpr int kThreads = 8;
  constexpr int kClaims = 20000;
  std::vector<std::thread> threads;
  std::vector<std::size_t> recalled(kThreads, 0), wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const auto n = static_cast<std::uint8_t>(t + 1);
      std::vector<Token> mine;
      for (int i = 0; i < kClaims; ++i) {
        const Token token = NewToken();
        memo.Remember(token, Fields(n));
        mine.push_back(token);
        if (mine.size() == 4) {
          for (const Token& old : mine) {
            if (auto got = memo.Take(old)) {
              ++recalled[t];
              if (got->id != Id(n)) ++wrong[t];
            }
          }
          mine.clear();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::size_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(wrong[t], 0u) << "thread " << t;
    total += recalled[t];
  }
  // With 4 claims per thread in flight over 256 slots most takes succeed.
  EXPECT_GT(total, std::size_t{kThreads} * kClaims / 2);
}

}  // namespace
}  // namespace idem
