// The PostgreSQL store's asynchronous calls (postgres_async_calls.h): what
// its batches must keep that the contract suite, which runs through them one
// call at a time (`postgres_async`), cannot force.
//  - In one batch, each id is acquired once however many claims of it the
//    batch holds, and each replay gets its own id's response (never
//    another's from the same statement), however many replays of it the
//    batch holds.
//  - Claims the batch's INSERT cannot take (an expired record, a lock timed
//    out) still take over, and the old holder's completion then fails.
//  - A completion of a claim the store does not remember reads the row.
//  - A call that waited longer than its bound is not sent at all.
//  - A statement that fails answers every call it carried with its error.
//  - A batch's claims and completions share a round trip, and each is
//    answered by its own statement: one that fails leaves the other's
//    answers.
//  - A batch sent into the pipeline behind another (calls queued while the
//    first is in flight) is answered after it, each call by its own
//    statement; rows in the way of the first batch are read after the
//    second's statements, and a statement that fails in either answers its
//    own calls only; a batch of claims can go behind a batch of
//    completions on a connection that has not run a claim yet.
//  - Many threads and another store instance on few ids: one holder each.
//
// Each test holds the store's thread (PostgresStoreTestPeer::
// PostToAsyncThread) while it makes the calls, so that they form one batch
// when it lets go. Against the shared server of IDEM_TEST_POSTGRES_URI,
// each test on a table of its own.

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/open_store.h"
#include "idem/postgres_store.h"
#include "idem/store.h"
#include "postgres_store_test_peer.h"
#include "postgres_test_util.h"
#include "support/ids.h"
#include "support/store_times.h"
#include "support/wait_for.h"

namespace idem {
namespace {

using ::testing::HasSubstr;
using testing::kLock;
using testing::kT0;
using testing::kTtl;
using testing::TestFingerprint;
using testing::TestId;

Response Body(std::string body) {
  return Response{201, {{"Content-Type", "text/plain"}}, std::move(body)};
}

// The answers of asynchronous calls, in the slots the test gives them.
template <typename T>
class Answers {
 public:
  explicit Answers(std::size_t n) : results_(n) {}

  StoreCallback<T> Slot(std::size_t i) {
    return [this, i](Result<T> r) {
      std::lock_guard<std::mutex> lock(mu_);
      if (results_[i].has_value()) ADD_FAILURE() << "slot " << i << " twice";
      results_[i] = std::move(r);
      ++count_;
    };
  }

  // Waits (bounded) until every slot has its answer.
  bool WaitAll() {
    return testing::WaitFor([&] {
      std::lock_guard<std::mutex> lock(mu_);
      return count_ == results_.size();
    });
  }

  const Result<T>& operator[](std::size_t i) const { return *results_[i]; }

 private:
  std::mutex mu_;
  std::vector<std::optional<Result<T>>> results_;
  std::size_t count_ = 0;
};

// Holds the store's thread from construction to Release (or destruction):
// the calls made meanwhile queue, and go as one batch.
class HeldThread {
 public:
  explicit HeldThread(PostgresStore& store) {
    PostgresStoreTestPeer::PostToAsyncThread(
        store, [gate = gate_.get_future().share(), this] {
          entered_.set_value();
          gate.wait();
        });
    entered_.get_future().wait();
  }
  ~HeldThread() { Release(); }
  void Release() {
    if (!released_) gate_.set_value();
    released_ = true;
  }

 private:
  std::promise<void> gate_;
  std::promise<void> entered_;
  bool released_ = false;
};

// Completes ids [0, holders.size()) with `holders`' tokens, "order <i>"
// each, into `completes`' slots: within a HeldThread, part of its batch.
void CompleteEach(PostgresStore& store, const std::vector<Token>& holders,
                  Answers<bool>& completes) {
  for (std::size_t i = 0; i < holders.size(); ++i) {
    store.CompleteAsync(
        TestId(i), holders[i],
        std::make_shared<const Response>(Body("order " + std::to_string(i))),
        completes.Slot(i));
  }
}

class PostgresAsyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IDEM_REQUIRE_TEST_POSTGRES();
    base_ = testing::PostgresTestUri();
    table_ = testing::UniquePostgresTable("idemasync");
  }
  void TearDown() override {
    if (!table_.empty()) testing::DropPostgresTable(base_, table_);
  }

  std::unique_ptr<PostgresStore> Open(const std::string& extra = "") {
    auto opened = OpenStore(
        testing::WithParams(
            base_, "table=" + table_ + (extra.empty() ? "" : "&" + extra)),
        {.sweep_interval = Duration::zero()});
    EXPECT_TRUE(opened.has_value()) << opened.error().ToString();
    if (!opened) return nullptr;
    auto* pg = dynamic_cast<PostgresStore*>(opened->get());
    EXPECT_NE(pg, nullptr);
    if (pg == nullptr) return nullptr;
    (void)opened->release();
    return std::unique_ptr<PostgresStore>(pg);
  }

  // Open(extra) on a table created beforehand with the default timeouts:
  // creating it waits for the schema lock, which other tests creating
  // theirs may hold longer than a short statement_timeout when loaded.
  std::unique_ptr<PostgresStore> OpenCreated(const std::string& extra) {
    if (Open() == nullptr) return nullptr;
    return Open(extra);
  }

  std::string base_;
  std::string table_;
};

TEST_F(PostgresAsyncTest, OneBatchAcquiresEachIdOnceAndReplaysItsOwnResponse) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  // Three claims of each id, more calls than one statement carries (64).
  constexpr std::size_t kIds = 40;
  constexpr std::size_t kEach = 3;
  Answers<ClaimResult> claims(kIds * kEach);
  {
    HeldThread held(*store);
    for (std::size_t k = 0; k < kEach; ++k) {
      for (std::size_t i = 0; i < kIds; ++i) {
        store->ClaimAsync(TestId(i), TestFingerprint(1), kT0, kTtl, kLock,
                          claims.Slot(k * kIds + i));
      }
    }
  }
  ASSERT_TRUE(claims.WaitAll());
  std::vector<Token> holders(kIds);
  for (std::size_t i = 0; i < kIds; ++i) {
    SCOPED_TRACE(i);
    int acquired = 0;
    for (std::size_t k = 0; k < kEach; ++k) {
      const auto& r = claims[k * kIds + i];
      ASSERT_TRUE(r.has_value()) << r.error().ToString();
      if (r->outcome == ClaimOutcome::kAcquired) {
        ++acquired;
        EXPECT_FALSE(r->takeover);
        holders[i] = r->token;
      } else {
        EXPECT_EQ(r->outcome, ClaimOutcome::kInProgress);
      }
    }
    EXPECT_EQ(acquired, 1);
  }

  Answers<bool> completes(kIds);
  {
    HeldThread held(*store);
    CompleteEach(*store, holders, completes);
  }
  ASSERT_TRUE(completes.WaitAll());
  for (std::size_t i = 0; i < kIds; ++i) {
    ASSERT_TRUE(completes[i].has_value()) << completes[i].error().ToString();
    EXPECT_TRUE(*completes[i]) << i;
  }

  // Two replays of every id, and a claim of each with another body: one
  // SELECT answers them all, each from its own row.
  Answers<ClaimResult> again(3 * kIds);
  {
    HeldThread held(*store);
    for (std::size_t i = 0; i < kIds; ++i) {
      store->ClaimAsync(TestId(i), TestFingerprint(1), kT0, kTtl, kLock,
                        again.Slot(i));
      store->ClaimAsync(TestId(i), TestFingerprint(2), kT0, kTtl, kLock,
                        again.Slot(kIds + i));
      store->ClaimAsync(TestId(i), TestFingerprint(1), kT0, kTtl, kLock,
                        again.Slot(2 * kIds + i));
    }
  }
  ASSERT_TRUE(again.WaitAll());
  for (std::size_t i = 0; i < kIds; ++i) {
    SCOPED_TRACE(i);
    for (const std::size_t slot : {i, 2 * kIds + i}) {
      const auto& replay = again[slot];
      ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
      ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
      ASSERT_NE(replay->response, nullptr);
      EXPECT_EQ(replay->response->body, "order " + std::to_string(i));
    }
    const auto& other = again[kIds + i];
    ASSERT_TRUE(other.has_value()) << other.error().ToString();
    EXPECT_EQ(other->outcome, ClaimOutcome::kMismatch);
  }
  EXPECT_EQ(
      testing::PostgresQuery(base_, "SELECT state, count(*) FROM \"" + table_ +
                                        "\" GROUP BY state"),
      (std::vector<std::vector<std::string>>{{"2", std::to_string(kIds)}}));
}

// Acquires ids [0, n) in one batch: the holders' tokens.
std::vector<Token> AcquireAll(PostgresStore& store, std::size_t n) {
  Answers<ClaimResult> claims(n);
  {
    HeldThread held(store);
    for (std::size_t i = 0; i < n; ++i) {
      store.ClaimAsync(TestId(i), TestFingerprint(1), kT0, kTtl, kLock,
                       claims.Slot(i));
    }
  }
  std::vector<Token> tokens;
  if (!claims.WaitAll()) {
    ADD_FAILURE() << "claims not answered";
    return tokens;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!claims[i] || claims[i]->outcome != ClaimOutcome::kAcquired) {
      ADD_FAILURE() << "id " << i << " not acquired";
      return {};
    }
    tokens.push_back(claims[i]->token);
  }
  return tokens;
}

// A batch's claims and completions go in one round trip (the INSERT, then
// the UPDATE: Connection::SendPipelined), each its own statement: a claim of
// an id the same batch completes sees the completed record, and every call
// gets its own answer.
TEST_F(PostgresAsyncTest, ClaimsAndCompletionsOfOneBatchAreAnsweredTogether) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  constexpr std::size_t kIds = 20;
  const std::vector<Token> holders = AcquireAll(*store, kIds);
  ASSERT_EQ(holders.size(), kIds);

  Answers<bool> completes(kIds);
  Answers<ClaimResult> claims(kIds + 1);
  {
    HeldThread held(*store);
    CompleteEach(*store, holders, completes);
    for (std::size_t i = 0; i < kIds; ++i) {
      store->ClaimAsync(TestId(kIds + i), TestFingerprint(1), kT0, kTtl, kLock,
                        claims.Slot(i));
    }
    // The retry of id 0, in the batch that completes it.
    store->ClaimAsync(TestId(0), TestFingerprint(1), kT0, kTtl, kLock,
                      claims.Slot(kIds));
  }
  ASSERT_TRUE(completes.WaitAll());
  ASSERT_TRUE(claims.WaitAll());
  for (std::size_t i = 0; i < kIds; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(completes[i].has_value()) << completes[i].error().ToString();
    EXPECT_TRUE(*completes[i]);
    ASSERT_TRUE(claims[i].has_value()) << claims[i].error().ToString();
    EXPECT_EQ(claims[i]->outcome, ClaimOutcome::kAcquired);
  }
  const auto& retry = claims[kIds];
  ASSERT_TRUE(retry.has_value()) << retry.error().ToString();
  ASSERT_EQ(retry->outcome, ClaimOutcome::kCompleted);
  ASSERT_NE(retry->response, nullptr);
  EXPECT_EQ(retry->response->body, "order 0");
  EXPECT_EQ(
      testing::PostgresQuery(base_, "SELECT state, count(*) FROM \"" + table_ +
                                        "\" GROUP BY state ORDER BY 1"),
      (std::vector<std::vector<std::string>>{{"1", std::to_string(kIds)},
                                             {"2", std::to_string(kIds)}}));
}

// Sent together, the two statements still fail apart: completions whose
// rows another session holds locked time out (the server's lock_timeout or
// statement_timeout, both 300 ms here: kUnavailable) while the claims of
// the same batch are acquired.
TEST_F(PostgresAsyncTest, AFailedUpdateLeavesTheBatchsClaimsAcquired) {
  auto store = OpenCreated("statement_timeout_ms=300");
  ASSERT_NE(store, nullptr);
  constexpr std::size_t kIds = 8;
  const std::vector<Token> holders = AcquireAll(*store, kIds);
  ASSERT_EQ(holders.size(), kIds);
  testing::PostgresConnection locker = testing::ConnectPostgres(base_);
  ASSERT_EQ(PQstatus(locker.get()), CONNECTION_OK);
  ASSERT_TRUE(testing::PostgresExec(locker.get(), "BEGIN"));
  ASSERT_TRUE(testing::PostgresExec(
      locker.get(), "SELECT 1 FROM \"" + table_ + "\" FOR UPDATE"));

  Answers<bool> completes(kIds);
  Answers<ClaimResult> claims(kIds);
  {
    HeldThread held(*store);
    CompleteEach(*store, holders, completes);
    for (std::size_t i = 0; i < kIds; ++i) {
      store->ClaimAsync(TestId(kIds + i), TestFingerprint(1), kT0, kTtl, kLock,
                        claims.Slot(i));
    }
  }
  ASSERT_TRUE(completes.WaitAll());
  ASSERT_TRUE(claims.WaitAll());
  EXPECT_TRUE(testing::PostgresExec(locker.get(), "ROLLBACK"));
  for (std::size_t i = 0; i < kIds; ++i) {
    SCOPED_TRACE(i);
    ASSERT_FALSE(completes[i].has_value());
    EXPECT_EQ(completes[i].error().code(), ErrorCode::kUnavailable);
    EXPECT_THAT(completes[i].error().message(), HasSubstr("complete: "));
    ASSERT_TRUE(claims[i].has_value()) << claims[i].error().ToString();
    EXPECT_EQ(claims[i]->outcome, ClaimOutcome::kAcquired);
  }
  // Nothing completed; the claims' rows are there.
  EXPECT_EQ(
      testing::PostgresQuery(base_, "SELECT state, count(*) FROM \"" + table_ +
                                        "\" GROUP BY state"),
      (std::vector<std::vector<std::string>>{{"1", std::to_string(2 * kIds)}}));
}

// And the other way round: a claim whose INSERT waits for a row another
// session is inserting times out, while the completions of the same batch
// are stored.
TEST_F(PostgresAsyncTest, AFailedInsertLeavesTheBatchsCompletionsStored) {
  auto store = OpenCreated("statement_timeout_ms=300");
  ASSERT_NE(store, nullptr);
  constexpr std::size_t kIds = 8;
  const std::vector<Token> holders = AcquireAll(*store, kIds);
  ASSERT_EQ(holders.size(), kIds);
  // Another session inserts the row of id kIds and does not commit: the
  // batch's INSERT of that id waits for it.
  testing::PostgresConnection inserter = testing::ConnectPostgres(base_);
  ASSERT_EQ(PQstatus(inserter.get()), CONNECTION_OK);
  ASSERT_TRUE(testing::PostgresExec(inserter.get(), "BEGIN"));
  ASSERT_TRUE(testing::PostgresExec(
      inserter.get(),
      "INSERT INTO \"" + table_ +
          "\" (id, state, fingerprint, token, locked_until, expires_at, "
          "takeover, record) VALUES ('\\x" +
          TestId(kIds).ToHex() + "', 1, '', '', 0, 0, false, '')"));

  Answers<bool> completes(kIds);
  Answers<ClaimResult> claims(1);
  {
    HeldThread held(*store);
    store->ClaimAsync(TestId(kIds), TestFingerprint(1), kT0, kTtl, kLock,
                      claims.Slot(0));
    CompleteEach(*store, holders, completes);
  }
  ASSERT_TRUE(completes.WaitAll());
  ASSERT_TRUE(claims.WaitAll());
  EXPECT_TRUE(testing::PostgresExec(inserter.get(), "ROLLBACK"));
  ASSERT_FALSE(claims[0].has_value());
  EXPECT_EQ(claims[0].error().code(), ErrorCode::kUnavailable);
  for (std::size_t i = 0; i < kIds; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(completes[i].has_value()) << completes[i].error().ToString();
    EXPECT_TRUE(*completes[i]);
  }
  EXPECT_EQ(
      testing::PostgresQuery(base_, "SELECT state, count(*) FROM \"" + table_ +
                                        "\" GROUP BY state"),
      (std::vector<std::vector<std::string>>{{"2", std::to_string(kIds)}}));
}

TEST_F(PostgresAsyncTest, ABatchTakesOverAndTheOldHolderCannotComplete) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  // 0: expired; 1: in progress, its lock timed out; 2: completed, expired.
  const TimePoint later = kT0 + std::chrono::hours(2);
  auto expired = store->Claim(TestId(0), TestFingerprint(1), kT0,
                              std::chrono::hours(1), kLock);
  auto timed_out = store->Claim(TestId(1), TestFingerprint(1), kT0, kTtl,
                                std::chrono::seconds(1));
  auto completed = store->Claim(TestId(2), TestFingerprint(1), kT0,
                                std::chrono::hours(1), kLock);
  ASSERT_TRUE(expired && timed_out && completed);
  ASSERT_TRUE(store->Complete(TestId(2), completed->token, Body("old")));

  Answers<ClaimResult> claims(3);
  {
    HeldThread held(*store);
    for (std::size_t i = 0; i < 3; ++i) {
      store->ClaimAsync(TestId(i), TestFingerprint(1), later, kTtl, kLock,
                        claims.Slot(i));
    }
  }
  ASSERT_TRUE(claims.WaitAll());
  for (std::size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(claims[i].has_value()) << claims[i].error().ToString();
    EXPECT_EQ(claims[i]->outcome, ClaimOutcome::kAcquired);
    // Only a lock that timed out is a takeover; an expired record is gone.
    EXPECT_EQ(claims[i]->takeover, i == 1);
  }

  Answers<bool> completes(4);
  {
    HeldThread held(*store);
    store->CompleteAsync(TestId(1), timed_out->token,
                         std::make_shared<const Response>(Body("stale")),
                         completes.Slot(0));
    for (std::size_t i = 0; i < 3; ++i) {
      store->CompleteAsync(TestId(i), claims[i]->token,
                           std::make_shared<const Response>(Body("new")),
                           completes.Slot(1 + i));
    }
  }
  ASSERT_TRUE(completes.WaitAll());
  for (std::size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(completes[i].has_value()) << completes[i].error().ToString();
    EXPECT_EQ(*completes[i], i != 0) << i;
  }
  for (std::size_t i = 0; i < 3; ++i) {
    auto record = store->Inspect(TestId(i), later);
    ASSERT_TRUE(record && record->has_value());
    ASSERT_NE((*record)->response, nullptr);
    EXPECT_EQ((*record)->response->body, "new") << i;
  }
}

TEST_F(PostgresAsyncTest, ACompletionOfAnotherInstancesClaimReadsTheRow) {
  auto store = Open();
  auto other = Open();
  ASSERT_TRUE(store != nullptr && other != nullptr);
  auto claim = other->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(claim.has_value());
  Answers<bool> completes(2);
  {
    HeldThread held(*store);
    store->CompleteAsync(TestId(1), testing::TestToken(7),
                         std::make_shared<const Response>(Body("wrong")),
                         completes.Slot(0));
    store->CompleteAsync(TestId(1), claim->token,
                         std::make_shared<const Response>(Body("right")),
                         completes.Slot(1));
  }
  ASSERT_TRUE(completes.WaitAll());
  ASSERT_TRUE(completes[0].has_value()) << completes[0].error().ToString();
  EXPECT_FALSE(*completes[0]);
  ASSERT_TRUE(completes[1].has_value()) << completes[1].error().ToString();
  EXPECT_TRUE(*completes[1]);
  auto record = other->Inspect(TestId(1), kT0);
  ASSERT_TRUE(record && record->has_value());
  ASSERT_NE((*record)->response, nullptr);
  EXPECT_EQ((*record)->response->body, "right");
}

TEST_F(PostgresAsyncTest, ACallThatWaitedPastItsBoundIsNotSent) {
  auto store = Open("acquire_timeout_ms=100");
  ASSERT_NE(store, nullptr);
  auto held_claim =
      store->Claim(TestId(2), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(held_claim.has_value());
  Answers<ClaimResult> claims(1);
  Answers<bool> completes(1);
  {
    HeldThread held(*store);
    store->ClaimAsync(TestId(1), TestFingerprint(1), kT0, kTtl, kLock,
                      claims.Slot(0));
    store->CompleteAsync(TestId(2), held_claim->token,
                         std::make_shared<const Response>(Body("late")),
                         completes.Slot(0));
    // Past both calls' deadline (100 ms after they were made).
    const auto past =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < past) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_TRUE(claims.WaitAll() && completes.WaitAll());
  ASSERT_FALSE(claims[0].has_value());
  EXPECT_EQ(claims[0].error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(claims[0].error().message(), HasSubstr("not sent"));
  ASSERT_FALSE(completes[0].has_value());
  EXPECT_EQ(completes[0].error().code(), ErrorCode::kUnavailable);
  // Nothing reached the table: no record of 1, 2 still in progress.
  auto one = store->Inspect(TestId(1), kT0);
  ASSERT_TRUE(one.has_value());
  EXPECT_FALSE(one->has_value());
  auto two = store->Inspect(TestId(2), kT0);
  ASSERT_TRUE(two && two->has_value());
  EXPECT_EQ((*two)->state, RecordState::kInProgress);
}

TEST_F(PostgresAsyncTest,
       AFailedStatementAnswersEveryCallItCarriedWithItsError) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  // The statements are planned each time: a table renamed away makes the
  // batch's INSERT fail (42P01, kInternal).
  constexpr std::size_t kCalls = 10;
  Answers<ClaimResult> claims(kCalls);
  {
    HeldThread held(*store);
    for (std::size_t i = 0; i < kCalls; ++i) {
      store->ClaimAsync(TestId(i % 4), TestFingerprint(1), kT0, kTtl, kLock,
                        claims.Slot(i));
    }
    testing::PostgresQuery(base_, "ALTER TABLE \"" + table_ +
                                      "\" RENAME TO \"" + table_ + "_away\"");
  }
  ASSERT_TRUE(claims.WaitAll());
  for (std::size_t i = 0; i < kCalls; ++i) {
    SCOPED_TRACE(i);
    ASSERT_FALSE(claims[i].has_value());
    EXPECT_EQ(claims[i].error().code(), ErrorCode::kInternal);
    EXPECT_THAT(claims[i].error().message(), HasSubstr("42P01"));
  }
  testing::PostgresQuery(base_, "ALTER TABLE \"" + table_ +
                                    "_away\" RENAME TO \"" + table_ + "\"");
  EXPECT_EQ(
      testing::PostgresQuery(base_, "SELECT count(*) FROM \"" + table_ + "\""),
      (std::vector<std::vector<std::string>>{{"0"}}));
  // The store goes on once the table is back.
  auto claim = store->Claim(TestId(1), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
}

// Makes `first` in one batch and, from the store's thread while that batch
// is being staged, `second`: queued before the first batch is flushed, so
// that it goes into the pipeline behind the first one's statements.
void TwoBatches(PostgresStore& store, const std::function<void()>& first,
                std::function<void()> second) {
  HeldThread held(store);
  first();
  PostgresStoreTestPeer::PostToAsyncThread(store, std::move(second));
}

// Claims `ids` (TestId(ids[i])) with `fp` into `answers`' slots from `at`.
void ClaimIds(PostgresStore& store, const std::vector<std::size_t>& ids, int fp,
              Answers<ClaimResult>& answers, std::size_t at) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    store.ClaimAsync(TestId(ids[i]), TestFingerprint(fp), kT0, kTtl, kLock,
                     answers.Slot(at + i));
  }
}

std::vector<std::size_t> Range(std::size_t from, std::size_t to) {
  std::vector<std::size_t> ids;
  for (std::size_t i = from; i < to; ++i) ids.push_back(i);
  return ids;
}

TEST_F(PostgresAsyncTest, ABatchSentBehindAnotherIsAnsweredAfterIt) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  constexpr std::size_t kIds = 10;
  // Both batches claim ids [0, 10) too: the second's claims of them are
  // decided by the rows the first inserted.
  Answers<ClaimResult> claims(4 * kIds);
  TwoBatches(
      *store, [&] { ClaimIds(*store, Range(0, kIds), 1, claims, 0); },
      [&] {
        ClaimIds(*store, Range(kIds, 2 * kIds), 1, claims, kIds);
        ClaimIds(*store, Range(0, kIds), 1, claims, 2 * kIds);
        ClaimIds(*store, Range(0, kIds), 2, claims, 3 * kIds);
      });
  ASSERT_TRUE(claims.WaitAll());
  EXPECT_EQ(PostgresStoreTestPeer::DeepestAsyncPipeline(*store), 2u);
  for (std::size_t i = 0; i < 2 * kIds; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(claims[i].has_value()) << claims[i].error().ToString();
    EXPECT_EQ(claims[i]->outcome, ClaimOutcome::kAcquired);
  }
  for (std::size_t i = 0; i < kIds; ++i) {
    SCOPED_TRACE(i);
    const auto& again = claims[2 * kIds + i];
    ASSERT_TRUE(again.has_value()) << again.error().ToString();
    EXPECT_EQ(again->outcome, ClaimOutcome::kInProgress);
    const auto& other = claims[3 * kIds + i];
    ASSERT_TRUE(other.has_value()) << other.error().ToString();
    EXPECT_EQ(other->outcome, ClaimOutcome::kMismatch);
  }
  EXPECT_EQ(
      testing::PostgresQuery(base_, "SELECT state, count(*) FROM \"" + table_ +
                                        "\" GROUP BY state"),
      (std::vector<std::vector<std::string>>{{"1", std::to_string(2 * kIds)}}));
}

// The first batch's replays need the rows in their way read (a SELECT on
// the same connection, once the second batch's results are read); the
// second batch completes ids and claims new ones meanwhile. Every replay
// gets its own id's response.
TEST_F(PostgresAsyncTest, RowsInTheWayAreReadWhileAnotherBatchIsInFlight) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  constexpr std::size_t kIds = 10;
  const std::vector<Token> holders = AcquireAll(*store, 2 * kIds);
  ASSERT_EQ(holders.size(), 2 * kIds);
  Answers<bool> done(kIds);
  {
    HeldThread held(*store);
    CompleteEach(*store, {holders.begin(), holders.begin() + kIds}, done);
  }
  ASSERT_TRUE(done.WaitAll());

  Answers<ClaimResult> claims(2 * kIds);
  Answers<bool> completes(kIds);
  TwoBatches(
      *store, [&] { ClaimIds(*store, Range(0, kIds), 1, claims, 0); },
      [&] {
        for (std::size_t i = 0; i < kIds; ++i) {
          store->CompleteAsync(TestId(kIds + i), holders[kIds + i],
                               std::make_shared<const Response>(
                                   Body("order " + std::to_string(kIds + i))),
                               completes.Slot(i));
        }
        ClaimIds(*store, Range(2 * kIds, 3 * kIds), 1, claims, kIds);
      });
  ASSERT_TRUE(claims.WaitAll());
  ASSERT_TRUE(completes.WaitAll());
  EXPECT_EQ(PostgresStoreTestPeer::DeepestAsyncPipeline(*store), 2u);
  for (std::size_t i = 0; i < kIds; ++i) {
    SCOPED_TRACE(i);
    const auto& replay = claims[i];
    ASSERT_TRUE(replay.has_value()) << replay.error().ToString();
    ASSERT_EQ(replay->outcome, ClaimOutcome::kCompleted);
    ASSERT_NE(replay->response, nullptr);
    EXPECT_EQ(replay->response->body, "order " + std::to_string(i));
    ASSERT_TRUE(completes[i].has_value()) << completes[i].error().ToString();
    EXPECT_TRUE(*completes[i]);
    ASSERT_TRUE(claims[kIds + i].has_value());
    EXPECT_EQ(claims[kIds + i]->outcome, ClaimOutcome::kAcquired);
  }
  EXPECT_EQ(
      testing::PostgresQuery(base_, "SELECT state, count(*) FROM \"" + table_ +
                                        "\" GROUP BY state ORDER BY 1"),
      (std::vector<std::vector<std::string>>{{"1", std::to_string(kIds)},
                                             {"2", std::to_string(2 * kIds)}}));
}

// A statement that fails in the pipeline answers its own batch's calls:
// the table is renamed away after the first batch's INSERT went out and
// before the second batch's did (on the store's thread, among the second
// batch's calls), so the first batch's claims are acquired and the
// second's fail with 42P01; the connection goes on.
TEST_F(PostgresAsyncTest, AStatementThatFailsInThePipelineAnswersItsOwnCalls) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  constexpr std::size_t kIds = 10;
  Answers<ClaimResult> claims(2 * kIds);
  const std::string away = table_ + "_away";
  TwoBatches(
      *store, [&] { ClaimIds(*store, Range(0, kIds), 1, claims, 0); },
      [&] {
        // Runs once the first batch is sent, and renames the table once
        // that batch's INSERT committed (sent is not yet run: a rename
        // the server took first would fail it too).
        PostgresStoreTestPeer::PostToAsyncThread(*store, [&] {
          EXPECT_TRUE(testing::WaitFor([&] {
            return testing::PostgresQuery(
                       base_, "SELECT count(*) FROM \"" + table_ + "\"") ==
                   std::vector<std::vector<std::string>>{
                       {std::to_string(kIds)}};
          }));
          testing::PostgresQuery(base_, "ALTER TABLE \"" + table_ +
                                            "\" RENAME TO \"" + away + "\"");
        });
        ClaimIds(*store, Range(kIds, 2 * kIds), 1, claims, kIds);
      });
  ASSERT_TRUE(claims.WaitAll());
  EXPECT_EQ(PostgresStoreTestPeer::DeepestAsyncPipeline(*store), 2u);
  for (std::size_t i = 0; i < kIds; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(claims[i].has_value()) << claims[i].error().ToString();
    EXPECT_EQ(claims[i]->outcome, ClaimOutcome::kAcquired);
    const auto& failed = claims[kIds + i];
    ASSERT_FALSE(failed.has_value());
    EXPECT_EQ(failed.error().code(), ErrorCode::kInternal);
    EXPECT_THAT(failed.error().message(), HasSubstr("42P01"));
  }
  testing::PostgresQuery(
      base_, "ALTER TABLE \"" + away + "\" RENAME TO \"" + table_ + "\"");
  EXPECT_EQ(
      testing::PostgresQuery(base_, "SELECT count(*) FROM \"" + table_ + "\""),
      (std::vector<std::vector<std::string>>{{std::to_string(kIds)}}));
  auto claim = store->Claim(TestId(kIds), TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(claim.has_value()) << claim.error().ToString();
  EXPECT_EQ(claim->outcome, ClaimOutcome::kAcquired);
}

// A batch of completions alone in flight on a new connection, and a batch
// of claims behind it: the claims' INSERT, a prepared statement, cannot be
// prepared once the pipeline runs, so it was prepared when the connection
// was leased.
TEST_F(PostgresAsyncTest, ClaimsGoBehindABatchOfCompletionsOnANewConnection) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  constexpr std::size_t kIds = 10;
  const std::vector<Token> holders = AcquireAll(*store, kIds);
  ASSERT_EQ(holders.size(), kIds);
  // Closes the store's connections (the only ones whose last statement
  // names this table), so that the next batch leases a new one.
  const std::string ours =
      " FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query LIKE '%" +
      table_ + "%'";
  const auto terminated = std::chrono::steady_clock::now();
  testing::PostgresQuery(base_, "SELECT pg_terminate_backend(pid)" + ours);
  // Gone, and past the pool's window for lending a connection returned
  // moments ago without checking it (20 ms, postgres_connection.cc).
  ASSERT_TRUE(testing::WaitFor([&] {
    return std::chrono::steady_clock::now() - terminated >
               std::chrono::milliseconds(50) &&
           testing::PostgresQuery(base_, "SELECT count(*)" + ours) ==
               std::vector<std::vector<std::string>>{{"0"}};
  }));
  Answers<bool> completes(kIds);
  Answers<ClaimResult> claims(kIds);
  TwoBatches(
      *store, [&] { CompleteEach(*store, holders, completes); },
      [&] { ClaimIds(*store, Range(kIds, 2 * kIds), 1, claims, 0); });
  ASSERT_TRUE(completes.WaitAll());
  ASSERT_TRUE(claims.WaitAll());
  EXPECT_EQ(PostgresStoreTestPeer::DeepestAsyncPipeline(*store), 2u);
  for (std::size_t i = 0; i < kIds; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(completes[i].has_value()) << completes[i].error().ToString();
    EXPECT_TRUE(*completes[i]);
    ASSERT_TRUE(claims[i].has_value()) << claims[i].error().ToString();
    EXPECT_EQ(claims[i]->outcome, ClaimOutcome::kAcquired);
  }
}

TEST_F(PostgresAsyncTest, ManyThreadsAndAnotherInstanceAcquireEachIdOnce) {
  auto store = Open("acquire_timeout_ms=120000&statement_timeout_ms=60000");
  auto other = Open("acquire_timeout_ms=120000&statement_timeout_ms=60000");
  ASSERT_TRUE(store != nullptr && other != nullptr);
  constexpr int kThreads = 8;
  constexpr int kClaimsPerThread = 100;
  constexpr int kIds = 16;
  std::vector<std::atomic<int>> acquired(kIds);
  std::atomic<int> answered{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kClaimsPerThread; ++i) {
        const int k = (t + i) % kIds;
        if (t % 4 == 3) {  // The other instance, synchronously.
          auto r =
              other->Claim(TestId(k), TestFingerprint(1), kT0, kTtl, kLock);
          if (!r) failed.fetch_add(1);
          if (r && r->outcome == ClaimOutcome::kAcquired) acquired[k]++;
          answered.fetch_add(1);
          continue;
        }
        store->ClaimAsync(TestId(k), TestFingerprint(1), kT0, kTtl, kLock,
                          [&, k](Result<ClaimResult> r) {
                            if (!r) failed.fetch_add(1);
                            if (r && r->outcome == ClaimOutcome::kAcquired) {
                              acquired[k]++;
                            }
                            answered.fetch_add(1);
                          });
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(testing::WaitFor(
      [&] { return answered.load() == kThreads * kClaimsPerThread; }));
  EXPECT_EQ(failed.load(), 0);
  for (int k = 0; k < kIds; ++k) EXPECT_EQ(acquired[k].load(), 1) << k;
}

}  // namespace
}  // namespace idem
