// The exactly-once suites of the SQL stores: a record completed inside the
// application's own transaction, one set of tests run on every SQL backend
// (SQLite, PostgreSQL), as the store contract suite is run on every store.
//
//  - SqlTransactionTest (sql_transaction_suite.cc): the store's
//    CompleteInTransaction, the fencing token checked inside the caller's
//    transaction on its own connection, and the connections it refuses.
//  - SqlOnceTest (sql_once_suite.cc): sql::RunOnceInTransaction over the
//    backend's transaction type with a Guard.
//
// A backend joins with a SqlBackend of its own and one line for both suites,
// in a test binary that links idem_sql_transaction_suite:
//
//   IDEM_INSTANTIATE_SQL_TRANSACTION_SUITES(Sqlite, SqlBackendFactory{
//       .name = "sqlite",
//       .make = [] { return std::make_unique<SqliteSql>(); }});
//
// Cases only one backend has (SQLite's file checks, PostgreSQL's failed
// transactions, search_path and takeover inside an open transaction) stay in
// that backend's test file, on SqlTransactionFixtureOn<its SqlBackend>.
//
// Thread-safety: one test thread; a SqlBackend is used by its test only.

#ifndef IDEM_TESTS_BACKENDS_SQL_SQL_TRANSACTION_SUITE_H_
#define IDEM_TESTS_BACKENDS_SQL_SQL_TRANSACTION_SUITE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/error.h"
#include "idem/guard.h"
#include "idem/once.h"
#include "idem/response.h"
#include "idem/sql_transaction.h"
#include "idem/store.h"
#include "idem/types.h"

namespace idem::testing {

// The backend's transaction type (SqliteTransaction, PostgresTransaction)
// behind one interface, so that one test body drives either of them through
// sql::RunOnceInTransaction (which takes it as its `Tx`).
class AnySqlTransaction {
 public:
  virtual ~AnySqlTransaction() = default;
  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;
  virtual Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                                 const Response& stored) = 0;
};

// AnySqlTransaction over a `Tx` built from `args`.
template <typename Tx>
class AnySqlTransactionOf final : public AnySqlTransaction {
 public:
  template <typename... Args>
  explicit AnySqlTransactionOf(Args&&... args)
      : tx_(std::forward<Args>(args)...) {}
  Status Begin() override { return tx_.Begin(); }
  Status Commit() override { return tx_.Commit(); }
  void Rollback() override { tx_.Rollback(); }
  Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                         const Response& stored) override {
    return tx_.Complete(claim, stored);
  }

 private:
  Tx tx_;
};

// One SQL backend for one test: a fresh store, the application's own
// connection to the store's database, and a table of the application's on
// it. Raw SQL on that connection stands for the application's own.
class SqlBackend {
 public:
  virtual ~SqlBackend() = default;

  // Opens the store and the connection and creates the application's table
  // `table` (the backend may make the name unique: table() is the one
  // made) with `columns`. Fails or skips the test through gtest assertions
  // when it cannot; the fixture checks.
  virtual void SetUp(const std::string& table, const std::string& columns) = 0;
  // Drops what SetUp made that would outlive the test (tables on a shared
  // server), after closing the connection and the store.
  virtual void TearDown() {}

  virtual std::shared_ptr<Store> store() = 0;
  virtual const std::string& table() const = 0;

  // Runs `sql` on the application's connection; a failure fails the test.
  virtual void Exec(const std::string& sql) = 0;
  // SELECT count(*) FROM table() on that connection; -1 when it fails.
  virtual long long Count() = 0;
  // Whether that connection has a transaction open.
  virtual bool InTransaction() = 0;

  // The store's CompleteInTransaction on that connection.
  virtual Result<TransactionCompletion> CompleteInTransaction(
      const RecordId& id, const Token& token, const Response& stored) = 0;
  // The same with a null connection.
  virtual Result<TransactionCompletion> CompleteWithoutConnection(
      const RecordId& id, const Token& token, const Response& stored) = 0;
  // The backend's transaction type on that connection.
  virtual std::unique_ptr<AnySqlTransaction> Transaction() = 0;

  // The statement that opens a transaction to complete a record in.
  virtual std::string begin_statement() const = 0;
  // Words of CompleteInTransaction's error for a connection that has no
  // transaction open.
  virtual std::string no_transaction_error() const = 0;
  // Whether another request can take a key over while the application's
  // transaction is open: on PostgreSQL it can (the completion's UPDATE is
  // the first to touch the record's row); on SQLite the store's own writes
  // wait for the file's write lock, which BEGIN IMMEDIATE took.
  virtual bool takeover_while_open() const = 0;
};

// `Base` (a SqlBackend) with its transactions on a connection the store
// lends (SqliteTransaction(store), PostgresTransaction(store)): what the
// suites run between begin_statement() and COMMIT or ROLLBACK goes to the
// lent connection; the rest (the tables, the counts, a connection outside
// any transaction) to Base's own. CompleteInTransaction passes the lent
// connection to the store's public call, which finds the loan. `Base`
// provides:
//   using LentTx = ...;   // The transaction type, built from the store.
//   using Handle = ...;   // Its connection type (sqlite3*, PGconn*).
//   static Handle LentConnection(const LentTx&);  // nullptr when not open.
//   static void ExecOn(Handle, const std::string& sql);  // Fails the test.
//   Handle own_connection() const;
//   auto& lending_store();  // The store, as its own type.
template <typename Base>
class LentSqlBackend : public Base {
 public:
  using Tx = typename Base::LentTx;
  using Handle = typename Base::Handle;

  void Exec(const std::string& sql) override {
    if (sql == this->begin_statement()) {
      ASSERT_FALSE(script_tx_.has_value());
      script_tx_.emplace(this->lending_store());
      auto began = script_tx_->Begin();
      ASSERT_TRUE(began) << began.error().ToString();
      open_ = Base::LentConnection(*script_tx_);
    } else if (sql == "COMMIT" || sql == "ROLLBACK") {
      ASSERT_TRUE(script_tx_.has_value());
      if (sql == "COMMIT") {
        auto committed = script_tx_->Commit();
        EXPECT_TRUE(committed) << committed.error().ToString();
      }
      script_tx_.reset();  // Rolls back what is still open.
      open_ = nullptr;
    } else {
      Base::ExecOn(current(), sql);
    }
  }
  Result<TransactionCompletion> CompleteInTransaction(
      const RecordId& id, const Token& token, const Response& r) override {
    return this->lending_store().CompleteInTransaction(current(), id, token, r);
  }
  std::unique_ptr<AnySqlTransaction> Transaction() override {
    return std::make_unique<Lent>(*this);
  }

 protected:
  // The lent connection while a transaction is open on one (only Commit or
  // Rollback clear it), else nullptr.
  Handle open() const { return open_; }

 private:
  Handle current() const {
    return open_ != nullptr ? open_ : this->own_connection();
  }

  // The work's transaction (sql::RunOnceInTransaction's), whose connection
  // Exec uses while it is open.
  class Lent final : public AnySqlTransaction {
   public:
    explicit Lent(LentSqlBackend& owner)
        : owner_(owner), tx_(owner.lending_store()) {}
    Status Begin() override {
      Status began = tx_.Begin();
      owner_.open_ = Base::LentConnection(tx_);
      return began;
    }
    Status Commit() override {
      Status committed = tx_.Commit();
      owner_.open_ = nullptr;
      return committed;
    }
    void Rollback() override {
      tx_.Rollback();
      owner_.open_ = nullptr;
    }
    Result<TransactionCompletion> Complete(const ClaimHandle& claim,
                                           const Response& stored) override {
      return tx_.Complete(claim, stored);
    }

   private:
    LentSqlBackend& owner_;
    Tx tx_;
  };

  std::optional<Tx> script_tx_;  // BEGIN ... COMMIT by Exec.
  Handle open_ = nullptr;
};

// What a backend gives the parameterised suites.
struct SqlBackendFactory {
  // Test-name suffix: letters, digits and '_' only.
  std::string name;
  std::function<std::unique_ptr<SqlBackend>()> make;
};

// Names instantiations by SqlBackendFactory::name.
std::string SqlBackendName(
    const ::testing::TestParamInfo<SqlBackendFactory>& info);

// gtest prints the parameter of a failing test with this.
void PrintTo(const SqlBackendFactory& factory, std::ostream* os);

// A 201 JSON response with `body`.
Response Created(std::string body);

// The backend of one test, opened in SetUp and closed in TearDown. A
// subclass says which backend (NewBackend) and which table.
class SqlFixture : public ::testing::Test {
 protected:
  static constexpr Duration kTtl = std::chrono::hours(1);
  static constexpr Duration kLock = std::chrono::seconds(10);
  static constexpr TimePoint kT0 = TimePoint(std::chrono::hours(24 * 365 * 50));

  virtual std::unique_ptr<SqlBackend> NewBackend() = 0;

  // NewBackend() set up with the application's `table` of `columns`.
  void OpenBackend(const std::string& table, const std::string& columns);
  void TearDown() override;

  SqlBackend& backend() { return *backend_; }
  Store& store() { return *backend_->store(); }

 private:
  std::unique_ptr<SqlBackend> backend_;
};

// The CompleteInTransaction tests' fixture: the application's table
// `transfers`.
class SqlTransactionFixture : public SqlFixture {
 protected:
  void SetUp() override;

  // A claim of `id` acquired at `now`; its token.
  Token ClaimAt(const RecordId& id, TimePoint now);

  // begin_statement(); insert a row; CompleteInTransaction; COMMIT or
  // ROLLBACK as the completion says.
  Result<TransactionCompletion> CompleteAndCommit(const RecordId& id,
                                                  const Token& token,
                                                  const Response& r);

 private:
  std::uint64_t rows_inserted_ = 0;
};

// The RunOnceInTransaction tests' fixture: the application's table
// `charges`, a Guard on the store with a ManualClock.
class SqlOnceFixture : public SqlFixture {
 protected:
  void SetUp() override;
  void TearDown() override;

  // A Guard on the store with `options`, its lock timeout kLock.
  void Rebuild(GuardOptions options);

  // One charge of key "msg-1": RunOnceInTransaction whose work inserts a
  // row, counts a run and returns "receipt-<runs>", or throws when `fail`.
  // `takeover` runs where another request can take the key over while this
  // run holds its transaction: inside it, after the insert, where the
  // backend allows that (takeover_while_open()), else just before BEGIN.
  Result<OnceResult> Charge(std::function<void()> takeover = {},
                            bool fail = false);

  long long Rows() { return backend().Count(); }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(kT0);
  std::unique_ptr<Guard> guard_;
  int runs_ = 0;
};

// SqlTransactionFixture on a `Backend` of one backend's own, for the cases
// only that backend has: backend() is the `Backend`, with its own calls.
template <typename Backend>
class SqlTransactionFixtureOn : public SqlTransactionFixture {
 protected:
  std::unique_ptr<SqlBackend> NewBackend() override {
    auto backend = std::make_unique<Backend>();
    backend_ = backend.get();
    return backend;
  }
  // Hides SqlFixture::backend(): the same object, as its own type.
  Backend& backend() { return *backend_; }

 private:
  Backend* backend_ = nullptr;
};

// The parameterised suites: one instantiation per backend.
class SqlTransactionTest
    : public SqlTransactionFixture,
      public ::testing::WithParamInterface<SqlBackendFactory> {
 protected:
  std::unique_ptr<SqlBackend> NewBackend() override {
    return GetParam().make();
  }
};

class SqlOnceTest : public SqlOnceFixture,
                    public ::testing::WithParamInterface<SqlBackendFactory> {
 protected:
  std::unique_ptr<SqlBackend> NewBackend() override {
    return GetParam().make();
  }
};

}  // namespace idem::testing

// Instantiates both suites for one backend. `prefix` is an identifier
// (Sqlite, Postgres); the rest is an expression of type SqlBackendFactory.
// Use at namespace scope, once per binary.
#define IDEM_INSTANTIATE_SQL_TRANSACTION_SUITES(prefix, ...)                \
  namespace idem::testing {                                                 \
  INSTANTIATE_TEST_SUITE_P(prefix, SqlTransactionTest,                      \
                           ::testing::Values(__VA_ARGS__), SqlBackendName); \
  INSTANTIATE_TEST_SUITE_P(prefix, SqlOnceTest,                             \
                           ::testing::Values(__VA_ARGS__), SqlBackendName); \
  }                                                                         \
  static_assert(true, "")

#endif  // IDEM_TESTS_BACKENDS_SQL_SQL_TRANSACTION_SUITE_H_
