// SqlTransactionTest: the store's CompleteInTransaction on every SQL
// backend. The completion is visible only after the caller's commit, a
// rollback leaves the claim to release, every claim the caller no longer
// holds is kClaimLost and writes nothing, a completion after a renewal
// stays readable, and a connection outside a transaction is refused. Also
// the fixtures' common part.

#include "backends/sql/sql_transaction_suite.h"

#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "support/ids.h"

namespace idem::testing {

std::string SqlBackendName(
    const ::testing::TestParamInfo<SqlBackendFactory>& info) {
  return info.param.name;
}

void PrintTo(const SqlBackendFactory& factory, std::ostream* os) {
  *os << factory.name;
}

Response Created(std::string body) {
  Response r;
  r.status = 201;
  r.headers = {{"Content-Type", "application/json"}};
  r.body = std::move(body);
  return r;
}

void SqlFixture::OpenBackend(const std::string& table,
                             const std::string& columns) {
  backend_ = NewBackend();
  backend_->SetUp(table, columns);
}

void SqlFixture::TearDown() {
  if (backend_ != nullptr) backend_->TearDown();
}

void SqlTransactionFixture::SetUp() {
  OpenBackend("transfers", "id TEXT PRIMARY KEY");
}

Token SqlTransactionFixture::ClaimAt(const RecordId& id, TimePoint now) {
  auto claimed = store().Claim(id, TestFingerprint(1), now, kTtl, kLock);
  EXPECT_TRUE(claimed) << claimed.error().ToString();
  EXPECT_EQ(claimed->outcome, ClaimOutcome::kAcquired);
  return claimed->token;
}

Result<TransactionCompletion> SqlTransactionFixture::CompleteAndCommit(
    const RecordId& id, const Token& token, const Response& r) {
  backend().Exec(backend().begin_statement());
  backend().Exec("INSERT INTO " + backend().table() + " VALUES ('row-" +
                 std::to_string(++rows_inserted_) + "')");
  auto done = backend().CompleteInTransaction(id, token, r);
  backend().Exec(done && *done == TransactionCompletion::kStored ? "COMMIT"
                                                                 : "ROLLBACK");
  return done;
}

namespace {

using std::chrono::seconds;

TEST_P(SqlTransactionTest, StoredAndVisibleOnlyAfterCommit) {
  const RecordId id = TestId(1);
  const Token token = ClaimAt(id, kT0);
  backend().Exec(backend().begin_statement());
  backend().Exec("INSERT INTO " + backend().table() + " VALUES ('a')");
  auto done = backend().CompleteInTransaction(id, token, Created("x"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  // Not committed: the store's own reader still sees the claim.
  auto before = store().Inspect(id, kT0);
  ASSERT_TRUE(before && before->has_value());
  EXPECT_EQ((*before)->state, RecordState::kInProgress);
  backend().Exec("COMMIT");
  auto after = store().Inspect(id, kT0);
  ASSERT_TRUE(after && after->has_value());
  EXPECT_EQ((*after)->state, RecordState::kCompleted);
  EXPECT_EQ(*(*after)->response, Created("x"));
  auto replay = store().Claim(id, TestFingerprint(1), kT0, kTtl, kLock);
  ASSERT_TRUE(replay);
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
  EXPECT_EQ(backend().Count(), 1);
}

TEST_P(SqlTransactionTest, RollbackLeavesTheClaimToRelease) {
  const RecordId id = TestId(2);
  const Token token = ClaimAt(id, kT0);
  backend().Exec(backend().begin_statement());
  auto done = backend().CompleteInTransaction(id, token, Created("x"));
  ASSERT_TRUE(done && *done == TransactionCompletion::kStored);
  backend().Exec("ROLLBACK");
  auto record = store().Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
  auto released = store().Release(id, token);
  ASSERT_TRUE(released);
  EXPECT_TRUE(*released);
}

TEST_P(SqlTransactionTest, WrongTokenIsClaimLostAndWritesNothing) {
  const RecordId id = TestId(3);
  ClaimAt(id, kT0);
  auto done = CompleteAndCommit(id, TestToken(99), Created("x"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);
  EXPECT_EQ(backend().Count(), 0);
  auto record = store().Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
}

TEST_P(SqlTransactionTest, ExpiredAndReclaimedIsClaimLost) {
  const RecordId id = TestId(5);
  const Token first = ClaimAt(id, kT0);
  ClaimAt(id, kT0 + kTtl + seconds(1));
  auto done = CompleteAndCommit(id, first, Created("x"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);
}

TEST_P(SqlTransactionTest, ReleasedRevokedOrCompletedIsClaimLost) {
  const RecordId released = TestId(6);
  const Token t1 = ClaimAt(released, kT0);
  ASSERT_TRUE(store().Release(released, t1));
  auto done = CompleteAndCommit(released, t1, Created("x"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);

  const RecordId revoked = TestId(7);
  const Token t2 = ClaimAt(revoked, kT0);
  ASSERT_TRUE(store().Revoke(revoked));
  done = CompleteAndCommit(revoked, t2, Created("x"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);

  const RecordId twice = TestId(8);
  const Token t3 = ClaimAt(twice, kT0);
  done = CompleteAndCommit(twice, t3, Created("one"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  done = CompleteAndCommit(twice, t3, Created("two"));
  ASSERT_TRUE(done);
  EXPECT_EQ(*done, TransactionCompletion::kClaimLost);
  auto record = store().Inspect(twice, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->response->body, "one");
  EXPECT_EQ(backend().Count(), 1);
}

// The store remembers the claim's locked_until (idem/store/claim_memo.h); a
// renewal moves the column. The completion writes both together, so the
// completed record still agrees with its columns and reads back (not
// kDataLoss).
TEST_P(SqlTransactionTest, ACompletionAfterARenewalStaysReadable) {
  const RecordId id = TestId(10);
  const Token token = ClaimAt(id, kT0);
  auto renewed = store().ExtendLock(id, token, kT0 + kLock / 2, kLock);
  ASSERT_TRUE(renewed) << renewed.error().ToString();
  ASSERT_TRUE(*renewed);
  auto done = CompleteAndCommit(id, token, Created("renewed"));
  ASSERT_TRUE(done) << done.error().ToString();
  EXPECT_EQ(*done, TransactionCompletion::kStored);
  auto after = store().Inspect(id, kT0 + kLock);
  ASSERT_TRUE(after) << after.error().ToString();
  ASSERT_TRUE(after->has_value());
  EXPECT_EQ((*after)->state, RecordState::kCompleted);
  EXPECT_EQ(*(*after)->response, Created("renewed"));
  auto replay = store().Claim(id, TestFingerprint(1), kT0 + kLock, kTtl, kLock);
  ASSERT_TRUE(replay) << replay.error().ToString();
  EXPECT_EQ(replay->outcome, ClaimOutcome::kCompleted);
}

TEST_P(SqlTransactionTest, RefusesAConnectionOutsideATransaction) {
  const RecordId id = TestId(9);
  const Token token = ClaimAt(id, kT0);
  auto done = backend().CompleteInTransaction(id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(done.error().message().find(backend().no_transaction_error()),
            std::string::npos)
      << done.error().message();
  done = backend().CompleteWithoutConnection(id, token, Created("x"));
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().code(), ErrorCode::kInvalidArgument);
  // Nothing was written.
  auto record = store().Inspect(id, kT0);
  ASSERT_TRUE(record && record->has_value());
  EXPECT_EQ((*record)->state, RecordState::kInProgress);
}

}  // namespace
}  // namespace idem::testing
