// The store contract tests; see idem/testing/store_contract.h.
//
// Time: every call passes an explicit TimePoint derived from the fixture's
// ManualClock, so expiry and lock timeouts are exact and nothing sleeps.
// Concurrency tests start their threads on a std::barrier so that the calls
// under test really overlap, and keep every loop bounded.

#include "idem/testing/store_contract.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "idem/record.h"
#include "idem/response.h"
#include "idem/sweeper.h"
#include "idem/testing/status_matchers.h"
#include "idem/token.h"
#include "idem/types.h"
#include "store_contract_util.h"

namespace idem::testing {

int internal::StoreContractAnchor() {
  return internal::RenewalContractAnchor() +
         internal::CapabilityContractAnchor() +
         internal::TryClaimContractAnchor();
}

std::string StoreFactoryName(
    const ::testing::TestParamInfo<StoreFactory>& info) {
  return info.param.name;
}

void PrintTo(const StoreFactory& factory, std::ostream* os) {
  *os << "StoreFactory{" << factory.name << "}";
}

namespace {

using contract::ClaimedRecord;
using contract::Describe;
using contract::ExpectSameRecord;
using contract::ExpectSameResponse;
using contract::ForeignToken;
using contract::kForever;
using contract::kLock;
using contract::kTtl;
using contract::MakeBytes;
using contract::Ns;
using contract::RichResponse;
using contract::TestFp;
using contract::TestId;
using std::chrono::hours;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// Every byte value, repeated: catches text-mode encodings and truncation.
Response LargeBinaryResponse() {
  Response r;
  r.status = 200;
  r.headers = {{"Content-Type", "application/octet-stream"}};
  r.body.resize(256 * 1024);
  for (std::size_t i = 0; i < r.body.size(); ++i) {
    r.body[i] = static_cast<char>((i * 7 + i / 256) & 0xFF);
  }
  return r;
}

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

// ---------------------------------------------------------------------------
// The claim table, row by row.

TEST_P(StoreContractTest, ClaimOnAbsentIdAcquires) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  EXPECT_EQ(claim.outcome, ClaimOutcome::kAcquired) << Describe(claim);
  EXPECT_FALSE(claim.takeover);
  EXPECT_EQ(Ns(claim.locked_until), Ns(t0 + kLock));
  EXPECT_NE(claim.token, Token{});
  EXPECT_EQ(claim.response, nullptr);

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ExpectSameRecord(record, ClaimedRecord(TestFp(1), claim.token, t0));
}

TEST_P(StoreContractTest, ClaimOnExpiredInProgressRecordAcquiresAfresh) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(first, TestId(1), TestFp(1), t0);

  // Expired means absent: even another fingerprint acquires, and it is not a
  // takeover of the old lock.
  const TimePoint t1 = t0 + kTtl;
  ASSERT_OK_AND_ASSIGN(ClaimResult second,
                       store().Claim(TestId(1), TestFp(2), t1, kTtl, kLock));
  EXPECT_EQ(second.outcome, ClaimOutcome::kAcquired) << Describe(second);
  EXPECT_FALSE(second.takeover);
  EXPECT_NE(second.token, first.token);
  EXPECT_EQ(Ns(second.locked_until), Ns(t1 + kLock));

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, ClaimedRecord(TestFp(2), second.token, t1));

  // Same fingerprint after expiry: also a fresh claim, not a takeover.
  const TimePoint t2 = t1 + kTtl + seconds(1);
  ASSERT_OK_AND_ASSIGN(ClaimResult third,
                       store().Claim(TestId(1), TestFp(2), t2, kTtl, kLock));
  EXPECT_EQ(third.outcome, ClaimOutcome::kAcquired) << Describe(third);
  EXPECT_FALSE(third.takeover);
  EXPECT_NE(third.token, second.token);
}

TEST_P(StoreContractTest, ClaimOnExpiredCompletedRecordAcquires) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult first,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), first.token, RichResponse()));
  ASSERT_TRUE(completed);

  // expires_at <= now is expired: exactly at expires_at the key is free.
  const TimePoint t1 = t0 + kTtl;
  ASSERT_OK_AND_ASSIGN(ClaimResult again,
                       store().Claim(TestId(1), TestFp(3), t1, kTtl, kLock));
  EXPECT_EQ(again.outcome, ClaimOutcome::kAcquired) << Describe(again);
  EXPECT_FALSE(again.takeover);
  EXPECT_EQ(again.response, nullptr);

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, ClaimedRecord(TestFp(3), again.token, t1));
}

TEST_P(StoreContractTest, RecordIsLiveUntilJustBeforeExpiresAt) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult first,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), first.token, RichResponse()));
  ASSERT_TRUE(completed);

  const TimePoint last_live = t0 + kTtl - nanoseconds(1);
  ASSERT_OK_AND_ASSIGN(
      ClaimResult replay,
      store().Claim(TestId(1), TestFp(1), last_live, kTtl, kLock));
  EXPECT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), last_live));
  EXPECT_TRUE(record.has_value());
}

TEST_P(StoreContractTest, OtherFingerprintOnInProgressIsMismatch) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(first, TestId(1), TestFp(1), t0);
  const Record before{.state = RecordState::kInProgress,
                      .fingerprint = TestFp(1),
                      .token = first.token,
                      .locked_until = t0 + kLock,
                      .expires_at = t0 + kTtl};

  ASSERT_OK_AND_ASSIGN(ClaimResult locked,
                       store().Claim(TestId(1), TestFp(2), t0, kTtl, kLock));
  EXPECT_EQ(locked.outcome, ClaimOutcome::kMismatch) << Describe(locked);

  // The fingerprint check comes first: a timed-out lock is not taken over by
  // a different request.
  const TimePoint t1 = t0 + kLock + seconds(1);
  ASSERT_OK_AND_ASSIGN(ClaimResult timed_out,
                       store().Claim(TestId(1), TestFp(2), t1, kTtl, kLock));
  EXPECT_EQ(timed_out.outcome, ClaimOutcome::kMismatch) << Describe(timed_out);

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, before);
}

TEST_P(StoreContractTest, OtherFingerprintOnCompletedIsMismatch) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult first,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), first.token, RichResponse()));
  ASSERT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());

  const TimePoint t1 = t0 + hours(1);
  ASSERT_OK_AND_ASSIGN(ClaimResult other,
                       store().Claim(TestId(1), TestFp(2), t1, kTtl, kLock));
  EXPECT_EQ(other.outcome, ClaimOutcome::kMismatch) << Describe(other);
  EXPECT_EQ(other.response, nullptr);

  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t1));
  ExpectSameRecord(after, *before);
}

TEST_P(StoreContractTest, CompletedReplaysTheExactResponse) {
  const TimePoint t0 = Now();
  const Response response = RichResponse();
  ASSERT_OK_AND_ASSIGN(ClaimResult first,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool completed,
                       store().Complete(TestId(1), first.token, response));
  ASSERT_TRUE(completed);

  // Every replay gets the same response, also after the lock time passed.
  for (const TimePoint t : {t0, t0 + kLock, t0 + kTtl - seconds(1)}) {
    ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                         store().Claim(TestId(1), TestFp(1), t, kTtl, kLock));
    ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
    ExpectSameResponse(replay.response, response);
  }
}

TEST_P(StoreContractTest, CompletedReplaysAnEmptyResponse) {
  const TimePoint t0 = Now();
  const Response empty{.status = 204, .headers = {}, .body = ""};
  ASSERT_OK_AND_ASSIGN(ClaimResult first,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool completed,
                       store().Complete(TestId(1), first.token, empty));
  ASSERT_TRUE(completed);

  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ExpectSameResponse(replay.response, empty);
}

TEST_P(StoreContractTest, CompletedReplaysALargeBinaryBody) {
  const TimePoint t0 = Now();
  const Response large = LargeBinaryResponse();
  ASSERT_OK_AND_ASSIGN(ClaimResult first,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool completed,
                       store().Complete(TestId(1), first.token, large));
  ASSERT_TRUE(completed);

  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ExpectSameResponse(replay.response, large);
}

TEST_P(StoreContractTest, InProgressWhileLocked) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(first, TestId(1), TestFp(1), t0);
  const Record before{.state = RecordState::kInProgress,
                      .fingerprint = TestFp(1),
                      .token = first.token,
                      .locked_until = t0 + kLock,
                      .expires_at = t0 + kTtl};

  for (const TimePoint t :
       {t0, t0 + seconds(59), t0 + kLock - nanoseconds(1)}) {
    ASSERT_OK_AND_ASSIGN(ClaimResult busy,
                         store().Claim(TestId(1), TestFp(1), t, kTtl, kLock));
    EXPECT_EQ(busy.outcome, ClaimOutcome::kInProgress) << Describe(busy);
    EXPECT_EQ(Ns(busy.locked_until), Ns(t0 + kLock));
    EXPECT_EQ(busy.response, nullptr);
  }
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ExpectSameRecord(record, before);
}

TEST_P(StoreContractTest, TimedOutLockIsTakenOverWithANewToken) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(first, TestId(1), TestFp(1), t0);

  // locked_until <= now: exactly at locked_until the lock has timed out.
  const TimePoint t1 = t0 + kLock;
  ASSERT_OK_AND_ASSIGN(ClaimResult second,
                       store().Claim(TestId(1), TestFp(1), t1, kTtl, kLock));
  EXPECT_EQ(second.outcome, ClaimOutcome::kAcquired) << Describe(second);
  EXPECT_TRUE(second.takeover);
  EXPECT_NE(second.token, first.token);
  EXPECT_EQ(Ns(second.locked_until), Ns(t1 + kLock));

  // expires_at is renewed as for a new record.
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, ClaimedRecord(TestFp(1), second.token, t1));
}

TEST_P(StoreContractTest, OldHolderLosesAfterTakeover) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(old_holder, TestId(1), TestFp(1), t0);

  clock().Advance(seconds(61));
  const TimePoint t1 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult new_holder,
                       store().Claim(TestId(1), TestFp(1), t1, kTtl, kLock));
  ASSERT_EQ(new_holder.outcome, ClaimOutcome::kAcquired)
      << Describe(new_holder);
  ASSERT_TRUE(new_holder.takeover);
  const Record taken{.state = RecordState::kInProgress,
                     .fingerprint = TestFp(1),
                     .token = new_holder.token,
                     .locked_until = t1 + kLock,
                     .expires_at = t1 + kTtl};

  ASSERT_OK_AND_ASSIGN(
      bool stale_complete,
      store().Complete(TestId(1), old_holder.token, RichResponse()));
  EXPECT_FALSE(stale_complete);
  ASSERT_OK_AND_ASSIGN(bool stale_release,
                       store().Release(TestId(1), old_holder.token));
  EXPECT_FALSE(stale_release);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t1));
  ExpectSameRecord(record, taken);

  const Response response{.status = 200, .headers = {}, .body = "second"};
  ASSERT_OK_AND_ASSIGN(bool completed,
                       store().Complete(TestId(1), new_holder.token, response));
  EXPECT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), t1, kTtl, kLock));
  ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ExpectSameResponse(replay.response, response);
}

TEST_P(StoreContractTest, LockedUntilIsCappedAtExpiresAt) {
  const TimePoint t0 = Now();
  const Duration short_ttl = seconds(10);
  ASSERT_OK_AND_ASSIGN(ClaimResult first, store().Claim(TestId(1), TestFp(1),
                                                        t0, short_ttl, kLock));
  ASSERT_EQ(first.outcome, ClaimOutcome::kAcquired);
  EXPECT_EQ(Ns(first.locked_until), Ns(t0 + short_ttl));

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ExpectSameRecord(record, Record{.state = RecordState::kInProgress,
                                  .fingerprint = TestFp(1),
                                  .token = first.token,
                                  .locked_until = t0 + short_ttl,
                                  .expires_at = t0 + short_ttl});

  ASSERT_OK_AND_ASSIGN(
      ClaimResult busy,
      store().Claim(TestId(1), TestFp(1), t0 + seconds(9), short_ttl, kLock));
  EXPECT_EQ(busy.outcome, ClaimOutcome::kInProgress) << Describe(busy);
  EXPECT_EQ(Ns(busy.locked_until), Ns(t0 + short_ttl));

  // When the lock ends the record has expired too: a fresh claim.
  ASSERT_OK_AND_ASSIGN(
      ClaimResult after,
      store().Claim(TestId(1), TestFp(1), t0 + short_ttl, short_ttl, kLock));
  EXPECT_EQ(after.outcome, ClaimOutcome::kAcquired) << Describe(after);
  EXPECT_FALSE(after.takeover);
}

TEST_P(StoreContractTest, EveryAcquisitionGetsAFreshToken) {
  const TimePoint t0 = Now();
  std::set<Token> tokens;
  for (int i = 0; i < 100; ++i) {
    const RecordId id = TestId(i % 4);
    IDEM_CONTRACT_ACQUIRE(claim, id, TestFp(1), t0);
    EXPECT_TRUE(tokens.insert(claim.token).second) << "token reused at " << i;
    ASSERT_OK_AND_ASSIGN(bool released, store().Release(id, claim.token));
    ASSERT_TRUE(released);
  }
}

// ---------------------------------------------------------------------------
// Complete.

TEST_P(StoreContractTest, CompleteStoresTheResponseAndKeepsExpiresAt) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  clock().Advance(seconds(30));
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), claim.token, RichResponse()));
  EXPECT_TRUE(completed);

  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), Now()));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, RecordState::kCompleted);
  EXPECT_EQ(record->fingerprint, TestFp(1));
  EXPECT_EQ(Ns(record->expires_at), Ns(t0 + kTtl));
  ExpectSameResponse(record->response, RichResponse());

  // Still there one tick before the original expiry, gone at it.
  ASSERT_OK_AND_ASSIGN(auto last,
                       store().Inspect(TestId(1), t0 + kTtl - nanoseconds(1)));
  EXPECT_TRUE(last.has_value());
  ASSERT_OK_AND_ASSIGN(auto gone, store().Inspect(TestId(1), t0 + kTtl));
  EXPECT_FALSE(gone.has_value());
}

// The Guard completes through CompleteShared; it follows Complete's contract
// whether the store keeps the object or copies it.
TEST_P(StoreContractTest, CompleteSharedFollowsTheCompleteContract) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  auto response = std::make_shared<const Response>(RichResponse());
  ASSERT_OK_AND_ASSIGN(
      bool wrong, store().CompleteShared(TestId(1), ForeignToken(1), response));
  EXPECT_FALSE(wrong);
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().CompleteShared(TestId(1), claim.token, response));
  EXPECT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(
      bool again, store().CompleteShared(TestId(1), claim.token, response));
  EXPECT_FALSE(again);
  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), Now(), kTtl, kLock));
  EXPECT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
  ExpectSameResponse(replay.response, RichResponse());
}

TEST_P(StoreContractTest, CompleteWithAWrongTokenChangesNothing) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));

  ASSERT_OK_AND_ASSIGN(
      bool completed,
      store().Complete(TestId(1), ForeignToken(1), RichResponse()));
  EXPECT_FALSE(completed);
  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);

  // The right token on the wrong id is a wrong token too.
  ASSERT_OK_AND_ASSIGN(ClaimResult other,
                       store().Claim(TestId(2), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(
      bool crossed, store().Complete(TestId(2), claim.token, RichResponse()));
  EXPECT_FALSE(crossed);
  ASSERT_OK_AND_ASSIGN(auto other_record, store().Inspect(TestId(2), t0));
  ASSERT_TRUE(other_record.has_value());
  EXPECT_EQ(other_record->state, RecordState::kInProgress);
  EXPECT_EQ(other_record->token, other.token);
}

TEST_P(StoreContractTest, CompleteOnAnAbsentIdReturnsFalseAndCreatesNothing) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(
      bool completed,
      store().Complete(TestId(1), ForeignToken(1), RichResponse()));
  EXPECT_FALSE(completed);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(2), t0, kTtl, kLock));
  EXPECT_EQ(claim.outcome, ClaimOutcome::kAcquired) << Describe(claim);
}

TEST_P(StoreContractTest, CompleteOnACompletedRecordReturnsFalse) {
  const TimePoint t0 = Now();
  const Response first_response{.status = 201, .headers = {}, .body = "first"};
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), claim.token, first_response));
  ASSERT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));

  const Response second_response{
      .status = 500, .headers = {{"A", "b"}}, .body = "second"};
  ASSERT_OK_AND_ASSIGN(
      bool again, store().Complete(TestId(1), claim.token, second_response));
  EXPECT_FALSE(again);
  ASSERT_OK_AND_ASSIGN(
      bool foreign,
      store().Complete(TestId(1), ForeignToken(1), second_response));
  EXPECT_FALSE(foreign);

  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);
  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_EQ(replay.outcome, ClaimOutcome::kCompleted);
  ExpectSameResponse(replay.response, first_response);
}

TEST_P(StoreContractTest, CompleteAfterReleaseReturnsFalse) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool released, store().Release(TestId(1), claim.token));
  ASSERT_TRUE(released);
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), claim.token, RichResponse()));
  EXPECT_FALSE(completed);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());
}

// ---------------------------------------------------------------------------
// Release.

TEST_P(StoreContractTest, ReleaseDeletesTheRecord) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool released, store().Release(TestId(1), claim.token));
  EXPECT_TRUE(released);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());

  // Nothing is left behind: another fingerprint acquires, no takeover.
  ASSERT_OK_AND_ASSIGN(ClaimResult next,
                       store().Claim(TestId(1), TestFp(2), t0, kTtl, kLock));
  EXPECT_EQ(next.outcome, ClaimOutcome::kAcquired) << Describe(next);
  EXPECT_FALSE(next.takeover);
  EXPECT_NE(next.token, claim.token);
}

TEST_P(StoreContractTest, ReleaseWithAWrongTokenChangesNothing) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));
  ASSERT_OK_AND_ASSIGN(bool released,
                       store().Release(TestId(1), ForeignToken(1)));
  EXPECT_FALSE(released);
  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);
  ASSERT_OK_AND_ASSIGN(bool crossed, store().Release(TestId(2), claim.token));
  EXPECT_FALSE(crossed);
}

TEST_P(StoreContractTest, ReleaseOnAnAbsentIdReturnsFalse) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(bool released,
                       store().Release(TestId(1), ForeignToken(1)));
  EXPECT_FALSE(released);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());
}

TEST_P(StoreContractTest, ReleaseOnACompletedRecordReturnsFalse) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), claim.token, RichResponse()));
  ASSERT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));

  ASSERT_OK_AND_ASSIGN(bool released, store().Release(TestId(1), claim.token));
  EXPECT_FALSE(released);
  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);
}

TEST_P(StoreContractTest, SecondReleaseReturnsFalse) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool first, store().Release(TestId(1), claim.token));
  EXPECT_TRUE(first);
  ASSERT_OK_AND_ASSIGN(bool second, store().Release(TestId(1), claim.token));
  EXPECT_FALSE(second);

  // Nor does a stale token release a later holder's claim.
  IDEM_CONTRACT_ACQUIRE(next, TestId(1), TestFp(1), t0);
  ASSERT_OK_AND_ASSIGN(bool stale, store().Release(TestId(1), claim.token));
  EXPECT_FALSE(stale);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->token, next.token);
}

// ---------------------------------------------------------------------------
// Revoke.

TEST_P(StoreContractTest, RevokeOfACompletedRecordLetsTheNextClaimAcquire) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), claim.token, RichResponse()));
  ASSERT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(bool revoked, store().Revoke(TestId(1)));
  EXPECT_TRUE(revoked);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());

  // The same request runs again: a fresh claim, not a replay or takeover.
  ASSERT_OK_AND_ASSIGN(ClaimResult next,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  EXPECT_EQ(next.outcome, ClaimOutcome::kAcquired) << Describe(next);
  EXPECT_FALSE(next.takeover);
  EXPECT_NE(next.token, claim.token);
  // Other ids are untouched.
  ASSERT_OK_AND_ASSIGN(bool other, store().Revoke(TestId(2)));
  EXPECT_FALSE(other);
}

TEST_P(StoreContractTest, RevokeOfAnInProgressRecordFencesItsHolder) {
  const TimePoint t0 = Now();
  IDEM_CONTRACT_ACQUIRE(holder, TestId(1), TestFp(1), t0);
  ASSERT_OK_AND_ASSIGN(bool revoked, store().Revoke(TestId(1)));
  EXPECT_TRUE(revoked);

  // The lock is gone with the record: the next claim acquires at once,
  // with another fingerprint too, and is not a takeover.
  ASSERT_OK_AND_ASSIGN(ClaimResult next,
                       store().Claim(TestId(1), TestFp(2), t0, kTtl, kLock));
  EXPECT_EQ(next.outcome, ClaimOutcome::kAcquired) << Describe(next);
  EXPECT_FALSE(next.takeover);

  // The revoked holder's late calls lose, and change nothing.
  ASSERT_OK_AND_ASSIGN(bool completed, store().Complete(TestId(1), holder.token,
                                                        RichResponse()));
  EXPECT_FALSE(completed);
  ASSERT_OK_AND_ASSIGN(bool released, store().Release(TestId(1), holder.token));
  EXPECT_FALSE(released);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, RecordState::kInProgress);
  EXPECT_EQ(record->token, next.token);
  EXPECT_EQ(record->fingerprint, TestFp(2));
}

TEST_P(StoreContractTest, RevokeRightAfterTheClaimMakesCompleteReturnFalse) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult holder,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool revoked, store().Revoke(TestId(1)));
  ASSERT_TRUE(revoked);
  // No claim in between: the Complete must not resurrect the record.
  ASSERT_OK_AND_ASSIGN(
      bool completed,
      store().CompleteShared(TestId(1), holder.token,
                             std::make_shared<const Response>(RichResponse())));
  EXPECT_FALSE(completed);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());
}

TEST_P(StoreContractTest, RevokeOfAnAbsentIdReturnsFalse) {
  ASSERT_OK_AND_ASSIGN(bool revoked, store().Revoke(TestId(1)));
  EXPECT_FALSE(revoked);
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), Now()));
  EXPECT_FALSE(record.has_value());
  // Twice in a row: the second finds nothing.
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), Now(), kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool first, store().Revoke(TestId(1)));
  EXPECT_TRUE(first);
  ASSERT_OK_AND_ASSIGN(bool second, store().Revoke(TestId(1)));
  EXPECT_FALSE(second);
}

TEST_P(StoreContractTest, RevokeDeletesAnExpiredRecordToo) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(
      ClaimResult claim,
      store().Claim(TestId(1), TestFp(1), t0, seconds(10), kLock));
  ASSERT_OK_AND_ASSIGN(bool revoked, store().Revoke(TestId(1)));
  EXPECT_TRUE(revoked);
  // Nothing is left for PurgeExpired.
  ASSERT_OK_AND_ASSIGN(std::size_t purged,
                       store().PurgeExpired(t0 + seconds(10), 100));
  EXPECT_EQ(purged, 0u);
}

// Claims racing revokes of their id: every claim answers one of the claim
// table's outcomes (a lost race is kInProgress), never an error.
TEST_P(StoreContractTest, ClaimsRacingRevokesNeverFail) {
  constexpr int kClaimers = 6;
  constexpr int kRevokers = 2;
  constexpr int kRounds = 40;
  std::barrier start(kClaimers + kRevokers);
  std::vector<std::string> errors(kClaimers + kRevokers);
  std::vector<std::thread> threads;
  const TimePoint t0 = Now();
  for (int t = 0; t < kClaimers + kRevokers; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int round = 0; round < kRounds && errors[t].empty(); ++round) {
        if (t >= kClaimers) {
          auto revoked = store().Revoke(TestId(1));
          if (!revoked) errors[t] = revoked.error().ToString();
          continue;
        }
        auto claim = store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock);
        if (!claim) {
          errors[t] = "claim: " + claim.error().ToString();
        } else if (claim->outcome == ClaimOutcome::kMismatch) {
          errors[t] = "claim: mismatch for one fingerprint";
        } else if (claim->outcome == ClaimOutcome::kInProgress &&
                   claim->locked_until < t0) {
          // A holder's lock, or `now` for a lost race (store.h).
          errors[t] = "claim: in progress with locked_until before now";
        } else if (claim->outcome == ClaimOutcome::kAcquired &&
                   round % 2 == 0) {
          auto done = store().Complete(TestId(1), claim->token, RichResponse());
          if (!done) errors[t] = "complete: " + done.error().ToString();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kClaimers + kRevokers; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
  }
}

// ---------------------------------------------------------------------------
// Expiry and Inspect.

TEST_P(StoreContractTest, RecordsExpireAsTheClockPassesTtl) {
  const Duration ttl = hours(1);
  ASSERT_OK_AND_ASSIGN(ClaimResult completed_claim,
                       store().Claim(TestId(1), TestFp(1), Now(), ttl, kLock));
  ASSERT_OK_AND_ASSIGN(
      bool completed,
      store().Complete(TestId(1), completed_claim.token, RichResponse()));
  ASSERT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(ClaimResult pending,
                       store().Claim(TestId(2), TestFp(1), Now(), ttl, kLock));
  ASSERT_EQ(pending.outcome, ClaimOutcome::kAcquired);

  clock().Advance(ttl + seconds(1));
  for (const RecordId& id : {TestId(1), TestId(2)}) {
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(id, Now()));
    EXPECT_FALSE(record.has_value()) << Describe(*record);
    ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                         store().Claim(id, TestFp(1), Now(), ttl, kLock));
    EXPECT_EQ(claim.outcome, ClaimOutcome::kAcquired) << Describe(claim);
    EXPECT_FALSE(claim.takeover);
  }

  // The holder of the expired claim has lost it.
  ASSERT_OK_AND_ASSIGN(
      bool stale, store().Complete(TestId(2), pending.token, RichResponse()));
  EXPECT_FALSE(stale);
}

TEST_P(StoreContractTest, InspectOfAnAbsentIdIsEmpty) {
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), Now()));
  EXPECT_FALSE(record.has_value());
}

TEST_P(StoreContractTest, InspectReturnsTheFullRecord) {
  const TimePoint t0 = Now();
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(7), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(auto pending, store().Inspect(TestId(1), t0));
  ExpectSameRecord(pending, ClaimedRecord(TestFp(7), claim.token, t0));

  ASSERT_OK_AND_ASSIGN(
      bool completed, store().Complete(TestId(1), claim.token, RichResponse()));
  ASSERT_TRUE(completed);
  ASSERT_OK_AND_ASSIGN(auto done, store().Inspect(TestId(1), t0 + seconds(1)));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->state, RecordState::kCompleted);
  EXPECT_EQ(done->fingerprint, TestFp(7));
  EXPECT_EQ(Ns(done->expires_at), Ns(t0 + kTtl));
  ExpectSameResponse(done->response, RichResponse());
  // Inspect is a read: it changes nothing.
  ASSERT_OK_AND_ASSIGN(auto again, store().Inspect(TestId(1), t0 + seconds(1)));
  ExpectSameRecord(again, *done);
}

TEST_P(StoreContractTest, IdsAreIndependent) {
  const TimePoint t0 = Now();
  // Ids that differ in one byte only, at either end.
  RecordId base = TestId(1);
  RecordId last_byte = base;
  last_byte.bytes[31] ^= 1;
  RecordId first_byte = base;
  first_byte.bytes[0] ^= 1;

  ASSERT_OK_AND_ASSIGN(ClaimResult a,
                       store().Claim(base, TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(bool completed,
                       store().Complete(base, a.token, RichResponse()));
  ASSERT_TRUE(completed);
  for (const RecordId& id : {last_byte, first_byte}) {
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(id, t0));
    EXPECT_FALSE(record.has_value());
    ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                         store().Claim(id, TestFp(2), t0, kTtl, kLock));
    EXPECT_EQ(claim.outcome, ClaimOutcome::kAcquired) << Describe(claim);
    ASSERT_OK_AND_ASSIGN(bool released, store().Release(id, claim.token));
    EXPECT_TRUE(released);
  }
  ASSERT_OK_AND_ASSIGN(ClaimResult replay,
                       store().Claim(base, TestFp(1), t0, kTtl, kLock));
  EXPECT_EQ(replay.outcome, ClaimOutcome::kCompleted) << Describe(replay);
}

// ---------------------------------------------------------------------------
// PurgeExpired.

namespace {

// Ids 0..short_count-1 live `short_ttl`, the next long_count live a day; every
// other one is completed so that both states are purged.
void FillForPurge(Store& store, TimePoint t0, int short_count, int long_count,
                  Duration short_ttl) {
  for (int i = 0; i < short_count + long_count; ++i) {
    const Duration ttl = i < short_count ? short_ttl : kTtl;
    auto claim = store.Claim(TestId(i), TestFp(1), t0, ttl, kLock);
    ASSERT_THAT(claim, IsOk());
    ASSERT_EQ(claim->outcome, ClaimOutcome::kAcquired);
    if (i % 2 == 0) {
      auto completed = store.Complete(TestId(i), claim->token, RichResponse());
      ASSERT_THAT(completed, IsOk());
      ASSERT_TRUE(*completed);
    }
  }
}

}  // namespace

TEST_P(StoreContractTest, PurgeExpiredRemovesOnlyExpiredRecords) {
  const TimePoint t0 = Now();
  const Duration short_ttl = seconds(10);
  ASSERT_NO_FATAL_FAILURE(FillForPurge(store(), t0, 10, 6, short_ttl));

  // Nothing has expired yet, including one tick before.
  ASSERT_OK_AND_ASSIGN(
      std::size_t early,
      store().PurgeExpired(t0 + short_ttl - nanoseconds(1), 1000));
  EXPECT_EQ(early, 0u);

  const TimePoint t1 = t0 + short_ttl;
  ASSERT_OK_AND_ASSIGN(std::size_t purged, store().PurgeExpired(t1, 1000));
  EXPECT_EQ(purged, 10u);
  ASSERT_OK_AND_ASSIGN(std::size_t again, store().PurgeExpired(t1, 1000));
  EXPECT_EQ(again, 0u);

  // The live records are all still there, purged ones are gone even when
  // looked at as of a time before their expiry.
  for (int i = 0; i < 16; ++i) {
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(i), t0));
    EXPECT_EQ(record.has_value(), i >= 10) << "id " << i;
  }
}

TEST_P(StoreContractTest, PurgeExpiredHonoursTheLimit) {
  const TimePoint t0 = Now();
  const Duration short_ttl = seconds(10);
  ASSERT_NO_FATAL_FAILURE(FillForPurge(store(), t0, 10, 4, short_ttl));
  const TimePoint t1 = t0 + short_ttl + seconds(1);

  ASSERT_OK_AND_ASSIGN(std::size_t none, store().PurgeExpired(t1, 0));
  EXPECT_EQ(none, 0u);
  ASSERT_OK_AND_ASSIGN(std::size_t first, store().PurgeExpired(t1, 3));
  EXPECT_EQ(first, 3u);
  ASSERT_OK_AND_ASSIGN(std::size_t second, store().PurgeExpired(t1, 3));
  EXPECT_EQ(second, 3u);
  ASSERT_OK_AND_ASSIGN(std::size_t rest, store().PurgeExpired(t1, 100));
  EXPECT_EQ(rest, 4u);
  ASSERT_OK_AND_ASSIGN(std::size_t empty, store().PurgeExpired(t1, 100));
  EXPECT_EQ(empty, 0u);

  int live = 0;
  for (int i = 0; i < 14; ++i) {
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(i), t0));
    live += record.has_value();
  }
  EXPECT_EQ(live, 4);
}

TEST_P(StoreContractTest, PurgeExpiredOnAnEmptyStoreReturnsZero) {
  ASSERT_OK_AND_ASSIGN(std::size_t purged,
                       store().PurgeExpired(Now() + kForever, 100));
  EXPECT_EQ(purged, 0u);
}

TEST_P(StoreContractTest, PurgedIdsCanBeClaimedAgain) {
  const TimePoint t0 = Now();
  ASSERT_NO_FATAL_FAILURE(FillForPurge(store(), t0, 4, 0, seconds(10)));
  const TimePoint t1 = t0 + seconds(10);
  ASSERT_OK_AND_ASSIGN(std::size_t purged, store().PurgeExpired(t1, 100));
  EXPECT_EQ(purged, 4u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                         store().Claim(TestId(i), TestFp(2), t1, kTtl, kLock));
    EXPECT_EQ(claim.outcome, ClaimOutcome::kAcquired) << Describe(claim);
    EXPECT_FALSE(claim.takeover);
  }
}

// The background sweeper (sweeper.h) on this store: one pass, in several
// batches, deletes what expired and keeps what lives.
TEST_P(StoreContractTest, ASweepDeletesExpiredRecordsAndKeepsLiveOnes) {
  const TimePoint t0 = Now();
  const Duration short_ttl = seconds(10);
  ASSERT_NO_FATAL_FAILURE(FillForPurge(store(), t0, 10, 6, short_ttl));
  ASSERT_OK_AND_ASSIGN(auto sweeper,
                       Sweeper::Start(store(), {.interval = Duration::zero(),
                                                .batch = 4,
                                                .max_pass_time = hours(1),
                                                .clock = shared_clock()}));
  ASSERT_OK_AND_ASSIGN(std::size_t early, sweeper->SweepOnce());
  EXPECT_EQ(early, 0u);

  clock().Advance(short_ttl);
  ASSERT_OK_AND_ASSIGN(std::size_t purged, sweeper->SweepOnce());
  EXPECT_EQ(purged, 10u);
  const SweeperStats stats = sweeper->stats();
  EXPECT_EQ(stats.purged, 10u);
  EXPECT_EQ(stats.passes, 2u);
  EXPECT_EQ(stats.errors, 0u);
  // Batches of 4: 4, 4, 2 (short: the pass ends), after the empty first pass.
  EXPECT_EQ(stats.batches, 4u);
  for (int i = 0; i < 16; ++i) {
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(i), t0));
    EXPECT_EQ(record.has_value(), i >= 10) << "id " << i;
  }
}

// ---------------------------------------------------------------------------
// Arguments and Info.

TEST_P(StoreContractTest, NonPositiveTtlOrLockTimeoutIsInvalidArgument) {
  const TimePoint t0 = Now();
  const struct {
    Duration ttl;
    Duration lock_timeout;
  } cases[] = {{Duration::zero(), kLock},
               {-nanoseconds(1), kLock},
               {-kTtl, kLock},
               {kTtl, Duration::zero()},
               {kTtl, -nanoseconds(1)},
               {Duration::zero(), Duration::zero()}};
  for (const auto& c : cases) {
    auto claim = store().Claim(TestId(1), TestFp(1), t0, c.ttl, c.lock_timeout);
    ASSERT_FALSE(claim.has_value()) << Describe(*claim);
    EXPECT_THAT(claim, HasErrorCode(ErrorCode::kInvalidArgument));
  }
  ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(1), t0));
  EXPECT_FALSE(record.has_value());

  // A rejected call leaves an existing record alone too.
  ASSERT_OK_AND_ASSIGN(ClaimResult claim,
                       store().Claim(TestId(1), TestFp(1), t0, kTtl, kLock));
  ASSERT_OK_AND_ASSIGN(auto before, store().Inspect(TestId(1), t0));
  auto rejected =
      store().Claim(TestId(1), TestFp(1), t0 + kLock, Duration::zero(), kLock);
  ASSERT_THAT(rejected, HasErrorCode(ErrorCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(auto after, store().Inspect(TestId(1), t0));
  ASSERT_TRUE(before.has_value());
  ExpectSameRecord(after, *before);
}

TEST_P(StoreContractTest, InfoNamesTheBackend) {
  EXPECT_FALSE(store().Info().name.empty());
}

// ---------------------------------------------------------------------------
// Concurrency. Threads record what they saw; the checks run after join so a
// failure names the round and thread instead of racing gtest output.

namespace {

struct Observed {
  bool ok = false;
  std::string error;
  ClaimResult claim;
};

}  // namespace

TEST_P(StoreContractTest, ConcurrentClaimsOnAnAbsentIdAcquireExactlyOnce) {
  constexpr int kThreads = 32;
  constexpr int kRounds = 200;
  const TimePoint t0 = Now();
  std::vector<Observed> seen(kThreads * kRounds);
  // One thread set for all rounds; the barrier releases all 32 claims of a
  // round together, which is what makes them race.
  std::barrier<> start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        start.arrive_and_wait();
        // Half the threads send another request under the same key.
        auto claim =
            store().Claim(TestId(1000 + round), TestFp(t % 2), t0, kTtl, kLock);
        Observed& out = seen[round * kThreads + t];
        out.ok = claim.has_value();
        if (out.ok) {
          out.claim = std::move(*claim);
        } else {
          out.error = claim.error().ToString();
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();

  for (int round = 0; round < kRounds; ++round) {
    int winner = -1;
    int acquired = 0;
    for (int t = 0; t < kThreads; ++t) {
      const Observed& o = seen[round * kThreads + t];
      ASSERT_TRUE(o.ok) << "round " << round << " thread " << t << ": "
                        << o.error;
      if (o.claim.outcome == ClaimOutcome::kAcquired) {
        ++acquired;
        winner = t;
      }
    }
    ASSERT_EQ(acquired, 1) << "round " << round;
    const ClaimResult& win = seen[round * kThreads + winner].claim;
    EXPECT_FALSE(win.takeover);
    for (int t = 0; t < kThreads; ++t) {
      if (t == winner) continue;
      const ClaimResult& lose = seen[round * kThreads + t].claim;
      if (t % 2 == winner % 2) {
        EXPECT_EQ(lose.outcome, ClaimOutcome::kInProgress)
            << "round " << round << " thread " << t << ": " << Describe(lose);
        EXPECT_EQ(Ns(lose.locked_until), Ns(win.locked_until));
      } else {
        EXPECT_EQ(lose.outcome, ClaimOutcome::kMismatch)
            << "round " << round << " thread " << t << ": " << Describe(lose);
      }
    }
    ASSERT_OK_AND_ASSIGN(auto record,
                         store().Inspect(TestId(1000 + round), t0));
    ASSERT_TRUE(record.has_value());
    EXPECT_EQ(record->token, win.token) << "round " << round;
    EXPECT_EQ(record->fingerprint, TestFp(winner % 2));
  }
}

TEST_P(StoreContractTest, ConcurrentTakeoverOfATimedOutLockHappensOnce) {
  constexpr int kThreads = 16;
  constexpr int kRounds = 50;
  const TimePoint t0 = Now();
  const TimePoint t1 = t0 + kLock + seconds(1);
  std::vector<Token> original(kRounds);
  for (int round = 0; round < kRounds; ++round) {
    IDEM_CONTRACT_ACQUIRE(claim, TestId(round), TestFp(1), t0);
    original[round] = claim.token;
  }

  std::vector<Observed> seen(kThreads * kRounds);
  std::barrier<> start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        start.arrive_and_wait();
        auto claim = store().Claim(TestId(round), TestFp(1), t1, kTtl, kLock);
        Observed& out = seen[round * kThreads + t];
        out.ok = claim.has_value();
        if (out.ok) {
          out.claim = std::move(*claim);
        } else {
          out.error = claim.error().ToString();
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();

  for (int round = 0; round < kRounds; ++round) {
    int acquired = 0;
    const ClaimResult* win = nullptr;
    for (int t = 0; t < kThreads; ++t) {
      const Observed& o = seen[round * kThreads + t];
      ASSERT_TRUE(o.ok) << "round " << round << ": " << o.error;
      if (o.claim.outcome == ClaimOutcome::kAcquired) {
        ++acquired;
        win = &o.claim;
      }
    }
    ASSERT_EQ(acquired, 1) << "round " << round;
    EXPECT_TRUE(win->takeover);
    EXPECT_EQ(Ns(win->locked_until), Ns(t1 + kLock));
    for (int t = 0; t < kThreads; ++t) {
      const ClaimResult& c = seen[round * kThreads + t].claim;
      if (&c == win) continue;
      EXPECT_EQ(c.outcome, ClaimOutcome::kInProgress) << Describe(c);
      EXPECT_EQ(Ns(c.locked_until), Ns(t1 + kLock));
    }
    ASSERT_OK_AND_ASSIGN(
        bool stale,
        store().Complete(TestId(round), original[round], RichResponse()));
    EXPECT_FALSE(stale) << "round " << round;
  }
}

TEST_P(StoreContractTest, ConcurrentCompleteAndReleaseOfOneTokenSucceedOnce) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 100;
  const TimePoint t0 = Now();
  std::vector<Token> tokens(kRounds);
  for (int round = 0; round < kRounds; ++round) {
    ASSERT_OK_AND_ASSIGN(
        ClaimResult claim,
        store().Claim(TestId(round), TestFp(1), t0, kTtl, kLock));
    tokens[round] = claim.token;
  }
  auto response_of = [](int thread) {
    return Response{.status = 200 + thread,
                    .headers = {},
                    .body = "thread " + std::to_string(thread)};
  };

  // 1: the call returned true, 0: false, -1: error.
  std::vector<int> won(kThreads * kRounds, -1);
  std::barrier<> start(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Response response = response_of(t);
      for (int round = 0; round < kRounds; ++round) {
        start.arrive_and_wait();
        // Even threads complete, odd threads release, all with one token.
        auto done = t % 2 == 0 ? store().Complete(TestId(round), tokens[round],
                                                  response)
                               : store().Release(TestId(round), tokens[round]);
        if (done.has_value()) won[round * kThreads + t] = *done ? 1 : 0;
      }
    });
  }
  for (auto& thread : threads) thread.join();

  for (int round = 0; round < kRounds; ++round) {
    int winner = -1;
    int wins = 0;
    for (int t = 0; t < kThreads; ++t) {
      const int w = won[round * kThreads + t];
      ASSERT_NE(w, -1) << "round " << round << " thread " << t << " failed";
      if (w == 1) {
        ++wins;
        winner = t;
      }
    }
    ASSERT_EQ(wins, 1) << "round " << round;
    ASSERT_OK_AND_ASSIGN(auto record, store().Inspect(TestId(round), t0));
    if (winner % 2 == 0) {
      ASSERT_TRUE(record.has_value()) << "round " << round;
      EXPECT_EQ(record->state, RecordState::kCompleted);
      ExpectSameResponse(record->response, response_of(winner));
    } else {
      EXPECT_FALSE(record.has_value()) << "round " << round;
    }
  }
}

namespace {

// Random claim / complete / release / inspect from 16 threads on 64 ids,
// checked exactly against the claim table.
//
// Time stands still and ttl and lock timeout are a year, so nothing expires
// and no lock times out. Then:
//  - a token a thread got from Acquired is the only way to change its
//    record, so its one Complete or Release must return true, and a second
//    use (or any never-issued token) must return false;
//  - at most one thread holds an id at a time;
//  - a completed record never changes again, so every Completed replay and
//    every Inspect of it must show the response completed for that id.
// Each round uses 64 fresh ids, so ids do not all end up completed.
class RandomWorkload {
 public:
  static constexpr int kThreads = 16;
  static constexpr int kIds = 64;
  static constexpr int kRounds = 8;
  static constexpr int kOpsPerRound = 400;

  RandomWorkload(Store& store, TimePoint now)
      : store_(store), now_(now), slots_(kIds * kRounds) {}

  void Run() {
    std::barrier<> round_start(kThreads);
    std::vector<std::thread> threads;
    threads.reserve(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([this, t, &round_start] {
        Worker worker(*this, t);
        for (int round = 0; round < kRounds; ++round) {
          round_start.arrive_and_wait();
          worker.RunRound(round);
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }

  std::vector<std::string> Failures() const {
    std::vector<std::string> all;
    for (const auto& f : failures_) all.insert(all.end(), f.begin(), f.end());
    return all;
  }

  // How often each kind of result was seen, to show the run covered them.
  struct Counts {
    std::array<long, 4> claims{};  // Indexed by ClaimOutcome.
    long completes = 0;
    long releases = 0;
    long stale_rejected = 0;
  };
  Counts Totals() const {
    Counts total;
    for (const Counts& c : counts_) {
      for (int i = 0; i < 4; ++i) total.claims[i] += c.claims[i];
      total.completes += c.completes;
      total.releases += c.releases;
      total.stale_rejected += c.stale_rejected;
    }
    return total;
  }

 private:
  // What the threads share about one id of one round.
  struct Slot {
    // Threads that believe they hold the id: never above 1.
    std::atomic<int> holders{0};
    // 0 until the holder decides to complete; then the completion code
    // (which names the fingerprint and the response). Published before the
    // Complete call, so a thread that sees the record completed sees it.
    std::atomic<std::uint64_t> completion{0};
  };

  static constexpr std::uint64_t Completion(int thread, std::uint64_t seq,
                                            int fp_index) {
    return (static_cast<std::uint64_t>(thread + 1) << 48) | (seq << 1) |
           static_cast<std::uint64_t>(fp_index);
  }
  static int FpIndexOf(std::uint64_t completion) { return completion & 1; }
  static Response ResponseFor(std::uint64_t completion) {
    Response r;
    r.status = 200 + static_cast<int>(completion % 300);
    r.headers = {{"Content-Type", "application/octet-stream"},
                 {"X-Completion", std::to_string(completion)}};
    r.body.assign(reinterpret_cast<const char*>(&completion),
                  sizeof completion);
    r.body.append(completion % 7, '\0');
    return r;
  }
  Fingerprint FpFor(int id, int fp_index) const {
    return TestFp(static_cast<std::uint64_t>(id) * 2 + fp_index);
  }

  class Worker {
   public:
    Worker(RandomWorkload& w, int thread)
        : w_(w), thread_(thread), rng_(0x5eed0000u + thread) {}

    void RunRound(int round) {
      held_.fill(std::nullopt);
      used_.clear();
      for (int op = 0; op < kOpsPerRound; ++op) Step(round);
      // Finish every claim still held so the next round starts clean.
      for (int k = 0; k < kIds; ++k) {
        if (held_[k]) Finish(round, k, /*complete=*/rng_() % 2 == 0);
      }
    }

   private:
    struct Held {
      Token token;
      int fp_index;
    };

    void Fail(const std::string& what) {
      auto& list = w_.failures_[thread_];
      if (list.size() < 20) {
        list.push_back("thread " + std::to_string(thread_) + ": " + what);
      }
    }

    RecordId IdOf(int round, int k) const {
      return TestId(1'000'000 + static_cast<std::uint64_t>(round) * kIds + k);
    }
    Slot& SlotOf(int round, int k) { return w_.slots_[round * kIds + k]; }

    void Step(int round) {
      const int k = static_cast<int>(rng_() % kIds);
      const int dice = static_cast<int>(rng_() % 100);
      if (held_[k]) {
        if (dice < 15) {
          InspectHeld(round, k);
        } else if (dice < 30) {
          ClaimHeld(round, k);
        } else {
          Finish(round, k, /*complete=*/dice < 60);
        }
        return;
      }
      if (dice < 60) {
        ClaimFree(round, k);
      } else if (dice < 80) {
        InspectAny(round, k);
      } else {
        UseStaleToken(round, dice % 2 == 0);
      }
    }

    // A claim by a thread that does not hold the id.
    void ClaimFree(int round, int k) {
      Slot& slot = SlotOf(round, k);
      const int fp_index = static_cast<int>(rng_() % 2);
      const std::uint64_t before =
          slot.completion.load(std::memory_order_acquire);
      auto claim = w_.store_.Claim(IdOf(round, k), w_.FpFor(k, fp_index),
                                   w_.now_, kForever, kForever);
      if (!claim) return Fail("claim error " + claim.error().ToString());
      ++counts().claims[static_cast<int>(claim->outcome)];
      const std::string where =
          " (round " + std::to_string(round) + " id " + std::to_string(k) + ")";
      // Once a completion is published the record's fingerprint is fixed for
      // good: same fingerprint -> in progress or completed, other -> mismatch.
      const bool fixed = before != 0;
      const bool same = fixed && FpIndexOf(before) == fp_index;
      switch (claim->outcome) {
        case ClaimOutcome::kAcquired: {
          if (fixed) Fail("acquired a record being completed" + where);
          if (claim->takeover) Fail("takeover with no timed-out lock" + where);
          if (claim->locked_until != w_.now_ + kForever) {
            Fail("acquired with wrong locked_until" + where);
          }
          if (slot.holders.fetch_add(1, std::memory_order_acq_rel) != 0) {
            Fail("two holders at once" + where);
          }
          held_[k] = Held{claim->token, fp_index};
          break;
        }
        case ClaimOutcome::kInProgress:
          if (fixed && !same) Fail("in_progress for other fingerprint" + where);
          if (claim->locked_until != w_.now_ + kForever) {
            Fail("in_progress with wrong locked_until" + where);
          }
          break;
        case ClaimOutcome::kCompleted: {
          const std::uint64_t c =
              slot.completion.load(std::memory_order_acquire);
          if (c == 0) {
            Fail("completed but nobody completed it" + where);
          } else if (FpIndexOf(c) != fp_index) {
            Fail("completed for another fingerprint" + where);
          } else if (!claim->response ||
                     !(*claim->response == ResponseFor(c))) {
            Fail("replayed a response that was not stored" + where);
          }
          break;
        }
        case ClaimOutcome::kMismatch:
          if (same) Fail("mismatch on the same fingerprint" + where);
          break;
      }
    }

    // A claim by the holder itself: nobody else can have changed the record.
    void ClaimHeld(int round, int k) {
      const int fp_index = static_cast<int>(rng_() % 2);
      auto claim = w_.store_.Claim(IdOf(round, k), w_.FpFor(k, fp_index),
                                   w_.now_, kForever, kForever);
      if (!claim) return Fail("claim error " + claim.error().ToString());
      ++counts().claims[static_cast<int>(claim->outcome)];
      const ClaimOutcome want = fp_index == held_[k]->fp_index
                                    ? ClaimOutcome::kInProgress
                                    : ClaimOutcome::kMismatch;
      if (claim->outcome != want) {
        Fail("holder's own claim gave " + Describe(*claim));
      }
    }

    void InspectHeld(int round, int k) {
      auto record = w_.store_.Inspect(IdOf(round, k), w_.now_);
      if (!record) return Fail("inspect error " + record.error().ToString());
      const Record want{.state = RecordState::kInProgress,
                        .fingerprint = w_.FpFor(k, held_[k]->fp_index),
                        .token = held_[k]->token,
                        .locked_until = w_.now_ + kForever,
                        .expires_at = w_.now_ + kForever};
      if (!record->has_value() || !(**record == want)) {
        Fail("holder inspected " +
             (record->has_value() ? Describe(**record) : std::string("none")));
      }
    }

    void InspectAny(int round, int k) {
      Slot& slot = SlotOf(round, k);
      const std::uint64_t before =
          slot.completion.load(std::memory_order_acquire);
      auto record = w_.store_.Inspect(IdOf(round, k), w_.now_);
      if (!record) return Fail("inspect error " + record.error().ToString());
      if (!record->has_value()) {
        if (before != 0) Fail("record being completed vanished");
        return;
      }
      const Record& r = **record;
      if (r.expires_at != w_.now_ + kForever ||
          r.locked_until != w_.now_ + kForever) {
        Fail("inspect times wrong: " + Describe(r));
      }
      if (before != 0 && r.fingerprint != w_.FpFor(k, FpIndexOf(before))) {
        Fail("fingerprint changed after completion: " + Describe(r));
      }
      if (r.state == RecordState::kCompleted) {
        const std::uint64_t c = slot.completion.load(std::memory_order_acquire);
        if (c == 0 || r.fingerprint != w_.FpFor(k, FpIndexOf(c)) ||
            !r.response || !(*r.response == ResponseFor(c))) {
          Fail("completed record is not what was completed: " + Describe(r));
        }
      } else if (r.response) {
        Fail("in_progress record with a response: " + Describe(r));
      }
    }

    void Finish(int round, int k, bool complete) {
      Slot& slot = SlotOf(round, k);
      const Held held = *held_[k];
      held_[k].reset();
      // Give up the holder mark before the call: once the call lands another
      // thread may acquire at once (after a release).
      slot.holders.fetch_sub(1, std::memory_order_acq_rel);
      const RecordId id = IdOf(round, k);
      Result<bool> done = false;
      if (complete) {
        const std::uint64_t c = Completion(thread_, ++seq_, held.fp_index);
        slot.completion.store(c, std::memory_order_release);
        done = w_.store_.Complete(id, held.token, ResponseFor(c));
        ++counts().completes;
      } else {
        done = w_.store_.Release(id, held.token);
        ++counts().releases;
      }
      if (!done) return Fail("finish error " + done.error().ToString());
      if (!*done) {
        Fail(std::string(complete ? "Complete" : "Release") +
             " with the holder's token returned false");
      }
      used_.push_back({k, held.token});
    }

    // A token already used, or one never issued: must change nothing.
    void UseStaleToken(int round, bool complete) {
      int k;
      Token token;
      if (!used_.empty() && rng_() % 4 != 0) {
        const auto& [used_k, used_token] = used_[rng_() % used_.size()];
        k = used_k;
        token = used_token;
      } else {
        k = static_cast<int>(rng_() % kIds);
        token = ForeignToken(rng_());
      }
      const RecordId id = IdOf(round, k);
      auto done = complete ? w_.store_.Complete(id, token, ResponseFor(1))
                           : w_.store_.Release(id, token);
      if (!done) return Fail("stale call error " + done.error().ToString());
      if (*done) Fail("a stale or foreign token changed a record");
      ++counts().stale_rejected;
    }

    Counts& counts() { return w_.counts_[thread_]; }

    RandomWorkload& w_;
    const int thread_;
    std::mt19937_64 rng_;
    std::uint64_t seq_ = 0;
    std::array<std::optional<Held>, kIds> held_;
    std::vector<std::pair<int, Token>> used_;
  };

  Store& store_;
  const TimePoint now_;
  std::vector<Slot> slots_;
  std::array<std::vector<std::string>, kThreads> failures_;
  std::array<Counts, kThreads> counts_{};
};

}  // namespace

TEST_P(StoreContractTest, RandomConcurrentOperationsFollowTheClaimTable) {
  RandomWorkload workload(store(), Now());
  workload.Run();
  const std::vector<std::string> failures = workload.Failures();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  ASSERT_TRUE(failures.empty());

  const RandomWorkload::Counts c = workload.Totals();
  EXPECT_GT(c.claims[static_cast<int>(ClaimOutcome::kAcquired)], 0);
  EXPECT_GT(c.claims[static_cast<int>(ClaimOutcome::kInProgress)], 0);
  EXPECT_GT(c.claims[static_cast<int>(ClaimOutcome::kCompleted)], 0);
  EXPECT_GT(c.claims[static_cast<int>(ClaimOutcome::kMismatch)], 0);
  EXPECT_GT(c.completes, 0);
  EXPECT_GT(c.releases, 0);
  EXPECT_GT(c.stale_rejected, 0);
}

}  // namespace idem::testing
