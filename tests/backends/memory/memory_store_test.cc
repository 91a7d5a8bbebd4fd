// MemoryStore behaviour beyond the store contract: capacity, reclamation of
// expired records when full, PurgeExpired, and the `memory:` URI. Time comes
// only from explicit TimePoints.

#include "idem/memory_store.h"

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/store_uri.h"
#include "memory_test_util.h"

namespace idem {
namespace {

using memory_test::kT0;
using std::chrono::hours;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::TestFingerprint;
using testing::TestId;

std::unique_ptr<MemoryStore> OpenStore(std::size_t capacity) {
  auto store = MemoryStore::Open(MemoryStoreOptions{.capacity = capacity});
  EXPECT_TRUE(store.has_value()) << store.error().ToString();
  return std::move(*store);
}

// Claims `id` (fingerprint TestFingerprint(id)) and expects kAcquired; returns
// the token.
Token MustAcquire(MemoryStore& store, std::uint64_t id, TimePoint now,
                  Duration ttl = hours(1), Duration lock = seconds(60)) {
  auto r = store.Claim(TestId(id), TestFingerprint(id), now, ttl, lock);
  EXPECT_TRUE(r.has_value()) << r.error().ToString();
  if (!r) return {};
  EXPECT_EQ(r->outcome, ClaimOutcome::kAcquired) << "id " << id;
  return r->token;
}

void ExpectFull(MemoryStore& store, std::uint64_t id, TimePoint now) {
  auto r =
      store.Claim(TestId(id), TestFingerprint(id), now, hours(1), seconds(60));
  ASSERT_FALSE(r.has_value())
      << "id " << id << " got " << ClaimOutcomeName(r->outcome);
  EXPECT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(r.error().message(), HasSubstr("memory store full"));
}

TEST(MemoryStoreOpenTest, RejectsZeroCapacity) {
  auto store = MemoryStore::Open(MemoryStoreOptions{.capacity = 0});
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
}

TEST(MemoryStoreOpenTest, RejectsCapacityAboveMaximum) {
  auto store = MemoryStore::Open(
      MemoryStoreOptions{.capacity = MemoryStore::kMaxCapacity + 1});
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
}

TEST(MemoryStoreOpenTest, BucketsArePowerOfTwoAtLeastCapacity) {
  EXPECT_EQ(OpenStore(1)->stats().buckets, 16u);
  EXPECT_EQ(OpenStore(16)->stats().buckets, 16u);
  EXPECT_EQ(OpenStore(1000)->stats().buckets, 1024u);
  EXPECT_EQ(OpenStore(1025)->stats().buckets, 2048u);
}

TEST(MemoryStoreTest, InfoSaysInProcessAndNotDurable) {
  const StoreInfo info = OpenStore(4)->Info();
  EXPECT_EQ(info.name, "memory");
  EXPECT_FALSE(info.durable);
  EXPECT_FALSE(info.shared_across_processes);
}

TEST(MemoryStoreTest, RejectsNonPositiveDurations) {
  auto store = OpenStore(4);
  for (auto [ttl, lock] :
       {std::pair<Duration, Duration>{Duration::zero(), seconds(1)},
        {seconds(1), Duration::zero()},
        {seconds(-1), seconds(1)},
        {seconds(1), seconds(-5)}}) {
    auto r = store->Claim(TestId(1), TestFingerprint(1), kT0, ttl, lock);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(store->size(), 0u);
}

TEST(MemoryStoreTest, HugeDurationsSaturateInsteadOfOverflowing) {
  auto store = OpenStore(4);
  auto r = store->Claim(TestId(1), TestFingerprint(1), kT0, Duration::max(),
                        Duration::max());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->locked_until, TimePoint::max());
  auto rec = store->Inspect(TestId(1), kT0 + hours(24 * 365 * 100));
  ASSERT_TRUE(rec.has_value());
  ASSERT_TRUE(rec->has_value());
  EXPECT_EQ((*rec)->expires_at, TimePoint::max());
}

// The store keeps its own copy of a response, in its own memory
// (memory_stored_response.h): nothing of the caller's, and each replay and
// Inspect gets a response of its own, equal to the stored one, that outlives
// the record.
TEST(MemoryStoreTest, RecordsKeepTheirOwnCopyOfTheResponse) {
  auto store = OpenStore(4);
  Token t = MustAcquire(*store, 0, kT0);
  const Response stored{
      201, {{"Location", "/o/1"}, {"X-Empty", ""}}, std::string(300, 'b')};
  auto shared = std::make_shared<const Response>(stored);
  ASSERT_TRUE(store->CompleteShared(TestId(0), t, shared).value());
  EXPECT_EQ(shared.use_count(), 1);  // Not kept by the store.
  auto a =
      store->Claim(TestId(0), TestFingerprint(0), kT0, hours(1), seconds(60));
  auto b =
      store->Claim(TestId(0), TestFingerprint(0), kT0, hours(1), seconds(60));
  ASSERT_TRUE(a.has_value() && b.has_value());
  ASSERT_EQ(a->outcome, ClaimOutcome::kCompleted);
  ASSERT_NE(a->response, nullptr);
  ASSERT_NE(b->response, nullptr);
  EXPECT_EQ(*a->response, stored);
  EXPECT_EQ(*b->response, stored);
  EXPECT_NE(a->response.get(), b->response.get());
  auto rec = store->Inspect(TestId(0), kT0);
  ASSERT_TRUE(rec.has_value() && rec->has_value());
  ASSERT_NE((*rec)->response, nullptr);
  EXPECT_EQ(*(*rec)->response, stored);
  // Changes to other records of the store keep the response.
  for (std::uint64_t i = 1; i < 4; ++i) MustAcquire(*store, i, kT0);
  auto c =
      store->Claim(TestId(0), TestFingerprint(0), kT0, hours(1), seconds(60));
  ASSERT_TRUE(c.has_value() && c->response != nullptr);
  EXPECT_EQ(*c->response, stored);
  // A replay's response outlives the record and the store.
  ASSERT_TRUE(store->Revoke(TestId(0)).value());
  store.reset();
  EXPECT_EQ(*a->response, stored);
}

// An empty body and no headers, and a body too large for a size class (the
// process allocator's block), come back as they went in.
TEST(MemoryStoreTest, ResponsesOfEverySizeComeBackWhole) {
  auto store = OpenStore(8);
  const Response empty{204, {}, ""};
  const Response large{200,
                       {{"Content-Type", "application/octet-stream"}},
                       std::string(200 * 1024, 'x')};
  Token t0 = MustAcquire(*store, 0, kT0);
  Token t1 = MustAcquire(*store, 1, kT0);
  ASSERT_TRUE(store->Complete(TestId(0), t0, empty).value());
  ASSERT_TRUE(store->Complete(TestId(1), t1, large).value());
  auto r0 =
      store->Claim(TestId(0), TestFingerprint(0), kT0, hours(1), seconds(60));
  auto r1 =
      store->Claim(TestId(1), TestFingerprint(1), kT0, hours(1), seconds(60));
  ASSERT_TRUE(r0.has_value() && r0->response != nullptr);
  ASSERT_TRUE(r1.has_value() && r1->response != nullptr);
  EXPECT_EQ(*r0->response, empty);
  EXPECT_EQ(*r1->response, large);
}

TEST(MemoryStoreCapacityTest, FullStoreRejectsNewKeysButAnswersHeldOnes) {
  auto store = OpenStore(4);
  Token t0 = MustAcquire(*store, 0, kT0);
  MustAcquire(*store, 1, kT0);
  MustAcquire(*store, 2, kT0);
  MustAcquire(*store, 3, kT0);
  ASSERT_TRUE(
      store->Complete(TestId(0), t0, Response{201, {}, "done"}).value());

  auto full =
      store->Claim(TestId(4), TestFingerprint(4), kT0, hours(1), seconds(60));
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code(), ErrorCode::kResourceExhausted);
  // 4 records, one of them completed with a 4-byte body and no header.
  EXPECT_EQ(full.error().message(),
            "memory store full: 4 live records (capacity 4), " +
                std::to_string(4 * MemoryStore::kRecordBytes +
                               MemoryStore::kResponseBytes + 4) +
                " bytes (max_bytes 268435456)");

  // Keys already held need no new slot.
  EXPECT_EQ(
      store->Claim(TestId(0), TestFingerprint(0), kT0, hours(1), seconds(60))
          ->outcome,
      ClaimOutcome::kCompleted);
  EXPECT_EQ(
      store->Claim(TestId(1), TestFingerprint(1), kT0, hours(1), seconds(60))
          ->outcome,
      ClaimOutcome::kInProgress);
  EXPECT_EQ(
      store->Claim(TestId(2), TestFingerprint(99), kT0, hours(1), seconds(60))
          ->outcome,
      ClaimOutcome::kMismatch);
  EXPECT_EQ(store->size(), 4u);
}

TEST(MemoryStoreCapacityTest, ReleaseFreesASlot) {
  auto store = OpenStore(2);
  Token t0 = MustAcquire(*store, 0, kT0);
  MustAcquire(*store, 1, kT0);
  ExpectFull(*store, 2, kT0);
  ASSERT_TRUE(store->Release(TestId(0), t0).value());
  EXPECT_EQ(store->size(), 1u);
  MustAcquire(*store, 2, kT0);
  EXPECT_EQ(store->size(), 2u);
}

TEST(MemoryStoreCapacityTest, CompletedRecordsKeepTheirSlotUntilExpiry) {
  auto store = OpenStore(2);
  for (std::uint64_t i = 0; i < 2; ++i) {
    Token t = MustAcquire(*store, i, kT0);
    ASSERT_TRUE(store->Complete(TestId(i), t, Response{}).value());
  }
  ExpectFull(*store, 2, kT0 + hours(1) - seconds(1));
  EXPECT_EQ(store->PurgeExpired(kT0 + hours(1) - seconds(1), 10).value(), 0u);
  MustAcquire(*store, 2, kT0 + hours(1));
}

TEST(MemoryStoreCapacityTest, ExpiredRecordsAreReclaimedFirstWhenFull) {
  auto store = OpenStore(4);
  MustAcquire(*store, 0, kT0, seconds(10));
  Token t1 = MustAcquire(*store, 1, kT0, seconds(10));
  ASSERT_TRUE(store->Complete(TestId(1), t1, Response{}).value());
  MustAcquire(*store, 2, kT0, hours(1));
  MustAcquire(*store, 3, kT0, hours(1));

  const TimePoint later = kT0 + seconds(10);  // expires_at <= now: expired.
  MustAcquire(*store, 4, later);
  MustAcquire(*store, 5, later);
  ExpectFull(*store, 6, later);

  EXPECT_EQ(store->size(), 4u);
  EXPECT_EQ(store->stats().reclaimed, 2u);
  EXPECT_FALSE(store->Inspect(TestId(0), later)->has_value());
  EXPECT_FALSE(store->Inspect(TestId(1), later)->has_value());
  EXPECT_TRUE(store->Inspect(TestId(2), later)->has_value());
  EXPECT_TRUE(store->Inspect(TestId(3), later)->has_value());
  EXPECT_TRUE(store->Inspect(TestId(4), later)->has_value());
}

TEST(MemoryStoreCapacityTest, NotYetExpiredIsNotReclaimed) {
  auto store = OpenStore(1);
  MustAcquire(*store, 0, kT0, seconds(10));
  ExpectFull(*store, 1, kT0 + seconds(10) - Duration(1));
  EXPECT_TRUE(store->Inspect(TestId(0), kT0 + seconds(9))->has_value());
}

TEST(MemoryStoreCapacityTest, ClaimOverExpiredRecordOfSameIdReusesItsSlot) {
  auto store = OpenStore(1);
  Token first = MustAcquire(*store, 0, kT0, seconds(5));
  // Expired: the key is free again, even for another fingerprint, and this
  // is not a takeover.
  auto r = store->Claim(TestId(0), TestFingerprint(77), kT0 + seconds(5),
                        hours(1), seconds(60));
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->outcome, ClaimOutcome::kAcquired);
  EXPECT_FALSE(r->takeover);
  EXPECT_EQ(store->size(), 1u);
  EXPECT_FALSE(store->Complete(TestId(0), first, Response{}).value());
  ExpectFull(*store, 1, kT0 + seconds(5));
  EXPECT_EQ(store->stats().reclaimed, 0u);  // Replaced in place, not swept.
}

TEST(MemoryStoreCapacityTest, TakeoverKeepsTheSlot) {
  auto store = OpenStore(1);
  Token first = MustAcquire(*store, 0, kT0, hours(1), seconds(30));
  auto r = store->Claim(TestId(0), TestFingerprint(0), kT0 + seconds(30),
                        hours(1), seconds(30));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->outcome, ClaimOutcome::kAcquired);
  EXPECT_TRUE(r->takeover);
  EXPECT_EQ(store->size(), 1u);
  EXPECT_FALSE(store->Complete(TestId(0), first, Response{}).value());
  EXPECT_FALSE(store->Release(TestId(0), first).value());
  EXPECT_TRUE(store->Release(TestId(0), r->token).value());
  EXPECT_EQ(store->size(), 0u);
}

TEST(MemoryStoreCapacityTest, FullOfLiveRecordsDoesNotRescanOnEveryClaim) {
  auto store = OpenStore(16);  // 16 buckets: one sweep is a full pass.
  for (std::uint64_t i = 0; i < 16; ++i) {
    MustAcquire(*store, i, kT0, hours(1) + seconds(i));
  }
  ExpectFull(*store, 100, kT0 + seconds(1));
  const std::uint64_t swept = store->stats().swept_buckets;
  EXPECT_EQ(swept, 16u);
  for (std::uint64_t i = 101; i < 200; ++i) {
    ExpectFull(*store, i, kT0 + seconds(2));
  }
  EXPECT_EQ(store->stats().swept_buckets, swept);
  // Once the earliest record has expired, claims sweep again and succeed.
  MustAcquire(*store, 200, kT0 + hours(1));
  EXPECT_EQ(store->stats().reclaimed, 1u);
  EXPECT_FALSE(store->Inspect(TestId(0), kT0 + hours(1))->has_value());
  EXPECT_TRUE(store->Inspect(TestId(1), kT0 + hours(1))->has_value());
}

TEST(MemoryStoreCapacityTest, ShortTtlRecordAddedAfterAFullPassIsReclaimed) {
  auto store = OpenStore(16);
  Token t0 = MustAcquire(*store, 0, kT0);
  for (std::uint64_t i = 1; i < 16; ++i) MustAcquire(*store, i, kT0);
  ExpectFull(*store, 100, kT0);  // Remembers: nothing expires before +1h.
  ASSERT_TRUE(store->Release(TestId(0), t0).value());
  MustAcquire(*store, 101, kT0, seconds(5));  // Expires long before that.
  ExpectFull(*store, 102, kT0 + seconds(4));
  MustAcquire(*store, 102, kT0 + seconds(5));
  EXPECT_FALSE(store->Inspect(TestId(101), kT0 + seconds(5))->has_value());
}

TEST(MemoryStoreCapacityTest, TakeoverWithShorterTtlAfterAFullPassIsReclaimed) {
  auto store = OpenStore(16);
  for (std::uint64_t i = 0; i < 16; ++i) {
    MustAcquire(*store, i, kT0, hours(1), seconds(1));
  }
  ExpectFull(*store, 100, kT0 + seconds(2));
  auto r = store->Claim(TestId(3), TestFingerprint(3), kT0 + seconds(2),
                        seconds(5), seconds(1));
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->outcome, ClaimOutcome::kAcquired);
  ASSERT_TRUE(r->takeover);
  ExpectFull(*store, 101, kT0 + seconds(6));
  MustAcquire(*store, 101, kT0 + seconds(7));
  EXPECT_FALSE(store->Inspect(TestId(3), kT0 + seconds(7))->has_value());
}

TEST(MemoryStoreCapacityTest, ReclaimReachesEveryBucketOfALargeTable) {
  // 4096 buckets, more than one claim sweeps: the sweep resumes where the
  // previous one stopped, so a few claims find the one expired record.
  constexpr std::size_t kCapacity = 3000;
  auto store = OpenStore(kCapacity);
  ASSERT_GT(store->stats().buckets, 1024u);
  for (std::uint64_t i = 0; i < kCapacity; ++i) {
    MustAcquire(*store, i, kT0, i == 1234 ? seconds(1) : hours(1));
  }
  const TimePoint later = kT0 + seconds(1);
  int failures = 0;
  std::uint64_t next_id = kCapacity;
  for (;;) {
    auto r = store->Claim(TestId(next_id), TestFingerprint(next_id), later,
                          hours(1), seconds(60));
    if (r.has_value()) break;
    ASSERT_EQ(r.error().code(), ErrorCode::kResourceExhausted);
    ++next_id;
    ASSERT_LE(++failures, 4);
  }
  EXPECT_EQ(store->stats().reclaimed, 1u);
  EXPECT_FALSE(store->Inspect(TestId(1234), later)->has_value());
  ExpectFull(*store, next_id + 1, later);
}

TEST(MemoryStorePurgeTest, CountsAndRespectsTheLimit) {
  auto store = OpenStore(16);
  for (std::uint64_t i = 0; i < 10; ++i) {
    Token t = MustAcquire(*store, i, kT0, i < 6 ? seconds(1) : hours(1));
    if (i % 2 == 0) {
      ASSERT_TRUE(store->Complete(TestId(i), t, Response{}).value());
    }
  }
  const TimePoint later = kT0 + seconds(1);
  EXPECT_EQ(store->PurgeExpired(later, 0).value(), 0u);
  EXPECT_EQ(store->PurgeExpired(kT0, 100).value(), 0u);
  EXPECT_EQ(store->PurgeExpired(later, 4).value(), 4u);
  EXPECT_EQ(store->size(), 6u);
  EXPECT_EQ(store->PurgeExpired(later, 100).value(), 2u);
  EXPECT_EQ(store->PurgeExpired(later, 100).value(), 0u);
  EXPECT_EQ(store->size(), 4u);
  EXPECT_EQ(store->stats().purged, 6u);
  for (std::uint64_t i = 6; i < 10; ++i) {
    EXPECT_TRUE(store->Inspect(TestId(i), later)->has_value()) << i;
  }
}

TEST(MemoryStorePurgeTest, OneAtATimeEventuallyEmptiesTheStore) {
  // Limit 1 stops inside a bucket; the next call must resume there.
  constexpr std::size_t kCount = 64;
  auto store = OpenStore(kCount);
  for (std::uint64_t i = 0; i < kCount; ++i) {
    MustAcquire(*store, i, kT0, seconds(1));
  }
  for (std::size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(store->PurgeExpired(kT0 + seconds(1), 1).value(), 1u) << i;
  }
  EXPECT_EQ(store->PurgeExpired(kT0 + seconds(1), 1).value(), 0u);
  EXPECT_EQ(store->size(), 0u);
}

Result<std::unique_ptr<Store>> OpenUri(const std::string& text) {
  auto uri = StoreUri::Parse(text);
  if (!uri) return tl::unexpected(uri.error());
  return MemoryStore::OpenFromUri(*uri, StoreOptions{});
}

TEST(MemoryStoreUriTest, ParsesCapacity) {
  auto store = OpenUri("memory:?capacity=8");
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  auto* memory = dynamic_cast<MemoryStore*>(store->get());
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->capacity(), 8u);
  for (std::uint64_t i = 0; i < 8; ++i) MustAcquire(*memory, i, kT0);
  ExpectFull(*memory, 8, kT0);
}

TEST(MemoryStoreUriTest, DefaultsToOneMillion) {
  auto store = OpenUri("memory:");
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_EQ(dynamic_cast<MemoryStore&>(**store).capacity(), 1'000'000u);
  EXPECT_EQ(MemoryStoreOptions{}.capacity, 1'000'000u);
}

TEST(MemoryStoreUriTest, RejectsBadUris) {
  for (const char* text : {
           "memory:?capacity=0",
           "memory:?capacity=abc",
           "memory:?capacity=-3",
           "memory:?capacity=1073741825",
           "memory:?capacity=",
           "memory:?capacity=8&sync=true",
           "memory:?size=8",
           "memory:/tmp/store",
           "memory:somewhere",
           "memory://host/",
           "sqlite:/tmp/x.db",
       }) {
    auto store = OpenUri(text);
    ASSERT_FALSE(store.has_value()) << text;
    EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument) << text;
    EXPECT_THAT(store.error().message(), HasSubstr("store URI")) << text;
  }
}

// ---- The byte budget (max_bytes)

std::unique_ptr<MemoryStore> OpenWithBytes(std::size_t max_bytes,
                                           std::size_t capacity = 100000) {
  auto store = MemoryStore::Open(
      MemoryStoreOptions{.capacity = capacity, .max_bytes = max_bytes});
  EXPECT_TRUE(store.has_value()) << store.error().ToString();
  return std::move(*store);
}

Response Body(std::size_t n) {
  return Response{.status = 201,
                  .headers = {{"Content-Type", "text/plain"}},
                  .body = std::string(n, 'x')};
}

TEST(MemoryStoreBytesTest, ChargesAreDocumented) {
  EXPECT_EQ(MemoryStoreOptions{}.max_bytes, std::size_t{256} << 20);
  EXPECT_EQ(MemoryStore::ResponseBytes(Body(1000)),
            MemoryStore::kResponseBytes + MemoryStore::kHeaderBytes +
                std::string_view("Content-Type").size() +
                std::string_view("text/plain").size() + 1000);
}

TEST(MemoryStoreBytesTest, ClaimsStopAtMaxBytes) {
  constexpr std::size_t kMax = 4096;
  constexpr std::size_t kFits = kMax / MemoryStore::kRecordBytes;
  auto store = OpenWithBytes(kMax);
  for (std::uint64_t i = 0; i < kFits; ++i) MustAcquire(*store, i, kT0);
  EXPECT_EQ(store->bytes(), kFits * MemoryStore::kRecordBytes);
  auto full = store->Claim(TestId(kFits), TestFingerprint(kFits), kT0, hours(1),
                           seconds(60));
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(full.error().message(), HasSubstr("memory store full"));
  EXPECT_THAT(full.error().message(), HasSubstr("max_bytes 4096"));
  EXPECT_EQ(store->stats().bytes, kFits * MemoryStore::kRecordBytes);
  EXPECT_EQ(store->stats().max_bytes, kMax);
}

TEST(MemoryStoreBytesTest, ACompleteThatDoesNotFitLeavesTheRecordInProgress) {
  auto store = OpenWithBytes(4096);
  const Token token = MustAcquire(*store, 1, kT0);
  auto big = store->Complete(TestId(1), token, Body(5000));
  ASSERT_FALSE(big.has_value());
  EXPECT_EQ(big.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_THAT(big.error().message(), HasSubstr("memory store full"));
  // Unchanged: still locked by its holder, nothing else charged.
  auto record = store->Inspect(TestId(1), kT0);
  ASSERT_TRUE(record.has_value() && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
  EXPECT_EQ((*record)->token, token);
  EXPECT_EQ(store->bytes(), MemoryStore::kRecordBytes);
  EXPECT_EQ(
      store->Claim(TestId(1), TestFingerprint(1), kT0, hours(1), seconds(60))
          ->outcome,
      ClaimOutcome::kInProgress);
  // The same holder can still store a response that fits.
  ASSERT_EQ(store->Complete(TestId(1), token, Body(100)), true);
  EXPECT_EQ(store->bytes(),
            MemoryStore::kRecordBytes + MemoryStore::ResponseBytes(Body(100)));
}

TEST(MemoryStoreBytesTest, ACompleteSharedIsChargedToo) {
  auto store = OpenWithBytes(4096);
  const Token token = MustAcquire(*store, 1, kT0);
  auto big = store->CompleteShared(
      TestId(1), token, std::make_shared<const Response>(Body(5000)));
  ASSERT_FALSE(big.has_value());
  EXPECT_EQ(big.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(store->bytes(), MemoryStore::kRecordBytes);
}

TEST(MemoryStoreBytesTest, ReleasePurgeAndReuseGiveTheBytesBack) {
  auto store = OpenWithBytes(4096);
  const Token a = MustAcquire(*store, 1, kT0);
  const Token b = MustAcquire(*store, 2, kT0);
  ASSERT_EQ(store->Complete(TestId(2), b, Body(1000)), true);
  ASSERT_EQ(store->Release(TestId(1), a), true);
  EXPECT_EQ(store->bytes(),
            MemoryStore::kRecordBytes + MemoryStore::ResponseBytes(Body(1000)));
  // A claim over the expired completed record keeps its slot's charge and
  // gives back its response's.
  MustAcquire(*store, 2, kT0 + hours(2));
  EXPECT_EQ(store->bytes(), MemoryStore::kRecordBytes);
  ASSERT_EQ(store->PurgeExpired(kT0 + hours(4), 10), std::size_t{1});
  EXPECT_EQ(store->bytes(), 0u);
}

TEST(MemoryStoreBytesTest, RevokeGivesTheBytesBack) {
  auto store = OpenWithBytes(4096);
  const Token a = MustAcquire(*store, 1, kT0);
  const Token b = MustAcquire(*store, 2, kT0);
  ASSERT_EQ(store->Complete(TestId(2), b, Body(1000)), true);
  ASSERT_EQ(store->Revoke(TestId(2)), true);
  EXPECT_EQ(store->bytes(), MemoryStore::kRecordBytes);
  ASSERT_EQ(store->Revoke(TestId(1)), true);
  EXPECT_EQ(store->bytes(), 0u);
  EXPECT_EQ(store->Complete(TestId(1), a, Body(10)), false);
}

// A reclaiming call sweeps up to 1024 buckets: small tables, so that one
// sweep covers all of them.
TEST(MemoryStoreBytesTest, ExpiredRecordsAreReclaimedFirstWhenBytesRunOut) {
  auto store = OpenWithBytes(4096, /*capacity=*/64);
  // Expired at kT0 + 1 h, holding most of the budget.
  const Token old = MustAcquire(*store, 1, kT0);
  ASSERT_EQ(store->Complete(TestId(1), old, Body(3000)), true);
  // A claim that fits, then a Complete that fits only once the expired
  // record is reclaimed (by the time of the latest claim).
  const Token fresh = MustAcquire(*store, 2, kT0 + hours(2));
  ASSERT_EQ(store->Complete(TestId(2), fresh, Body(600)), true);
  EXPECT_EQ(store->bytes(),
            MemoryStore::kRecordBytes + MemoryStore::ResponseBytes(Body(600)));
  // The same for claims: fill with records that expire, then claim later.
  auto small = OpenWithBytes(4096, /*capacity=*/64);
  constexpr std::size_t kFits = 4096 / MemoryStore::kRecordBytes;
  for (std::uint64_t i = 0; i < kFits; ++i) {
    MustAcquire(*small, i, kT0, /*ttl=*/seconds(10), seconds(10));
  }
  ExpectFull(*small, kFits, kT0);
  MustAcquire(*small, kFits, kT0 + seconds(11));
  EXPECT_EQ(small->stats().reclaimed, kFits);
}

TEST(MemoryStoreBytesTest, OpenRejectsMaxBytesOutOfRange) {
  for (const std::size_t bad : {std::size_t{0}, MemoryStore::kMinMaxBytes - 1,
                                MemoryStore::kMaxMaxBytes + 1}) {
    auto store = MemoryStore::Open(MemoryStoreOptions{.max_bytes = bad});
    ASSERT_FALSE(store.has_value()) << bad;
    EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(store.error().message(), HasSubstr("max_bytes"));
  }
}

TEST(MemoryStoreUriTest, ParsesMaxBytes) {
  auto store = OpenUri("memory:?capacity=100&max_bytes=8192");
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  auto& memory = dynamic_cast<MemoryStore&>(**store);
  EXPECT_EQ(memory.max_bytes(), 8192u);
  EXPECT_EQ(memory.capacity(), 100u);
  auto defaults = OpenUri("memory:");
  ASSERT_TRUE(defaults.has_value());
  EXPECT_EQ(dynamic_cast<MemoryStore&>(**defaults).max_bytes(),
            std::size_t{256} << 20);
}

TEST(MemoryStoreUriTest, RejectsBadMaxBytesNamingIt) {
  for (const char* text : {
           "memory:?max_bytes=0",
           "memory:?max_bytes=4095",
           "memory:?max_bytes=1099511627777",
           "memory:?max_bytes=abc",
           "memory:?max_bytes=-1",
           "memory:?max_bytes=",
       }) {
    auto store = OpenUri(text);
    ASSERT_FALSE(store.has_value()) << text;
    EXPECT_EQ(store.error().code(), ErrorCode::kInvalidArgument) << text;
    EXPECT_THAT(store.error().message(), HasSubstr("max_bytes")) << text;
  }
}

// Resident memory of this process, in KiB (0 where /proc is missing).
std::size_t RssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  }
  return 0;
}

// The case: 1 MiB bodies, each under a new key. At the default
// budget the store takes 255 of them, then answers store full; the resident
// memory they add is printed (the bound is what the count asserts: RSS under
// sanitizers is not the store's).
TEST(MemoryStoreBytesTest, OneMiBBodiesStopAtTheDefaultBudget) {
  auto opened = MemoryStore::Open(MemoryStoreOptions{});
  ASSERT_TRUE(opened.has_value());
  MemoryStore& store = **opened;
  const std::size_t rss_before = RssKib();
  const Response body{201,
                      {{"Content-Type", "application/json"}},
                      std::string(std::size_t{1} << 20, 'x')};
  const std::size_t per_record =
      MemoryStore::kRecordBytes + MemoryStore::ResponseBytes(body);
  std::size_t stored = 0;
  bool full = false;
  for (std::uint64_t k = 0; k < 1000 && !full; ++k) {
    auto claim =
        store.Claim(TestId(k), TestFingerprint(k), kT0, hours(24), seconds(60));
    ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
    auto done = store.Complete(TestId(k), claim->token, body);
    if (!done) {
      EXPECT_EQ(done.error().code(), ErrorCode::kResourceExhausted);
      full = true;
      break;
    }
    ASSERT_TRUE(*done);
    ++stored;
  }
  ASSERT_TRUE(full);
  EXPECT_EQ(stored, MemoryStoreOptions::kDefaultMaxBytes / per_record);
  EXPECT_LE(store.bytes(), MemoryStoreOptions::kDefaultMaxBytes);
  std::cout << stored << " responses of 1 MiB stored before store full; RSS "
            << rss_before / 1024 << " MiB -> " << RssKib() / 1024 << " MiB"
            << std::endl;
}

}  // namespace
}  // namespace idem
