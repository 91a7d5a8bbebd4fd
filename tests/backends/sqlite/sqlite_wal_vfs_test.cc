// The VFS that gathers a connection's WAL writes (sqlite_wal_vfs.h): every
// committed transaction is in the file when its COMMIT returns, whatever
// its size, so that another connection on the default VFS (another
// process, idemctl) reads exactly what was committed; a transaction rolled
// back after its pages spilled into the WAL leaves nothing behind; and the
// store's connections use it.

#include "sqlite_wal_vfs.h"

#include <sqlite3.h>

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "idem/sqlite_store_options.h"
#include "sqlite_connection.h"
#include "support/temp_dir.h"

namespace idem::sqlite_internal {
namespace {

struct Closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using Db = std::unique_ptr<sqlite3, Closer>;

Db OpenDb(const std::string& path, const char* vfs) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs);
  EXPECT_EQ(rc, SQLITE_OK) << sqlite3_errstr(rc);
  return Db(db);
}

void Exec(sqlite3* db, const std::string& sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message);
  EXPECT_EQ(rc, SQLITE_OK) << sql << ": "
                           << (message != nullptr ? message : "");
  sqlite3_free(message);
}

// The single value `sql` selects, as text ("" if none).
std::string Select(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sql << ": " << sqlite3_errmsg(db);
  std::string value;
  if (sqlite3_step(stmt) == SQLITE_ROW) {
    const auto* text = sqlite3_column_text(stmt, 0);
    if (text != nullptr) value = reinterpret_cast<const char*>(text);
  }
  sqlite3_finalize(stmt);
  return value;
}

class SqliteWalVfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(WalBufferingVfs(), nullptr);
    path_ = (dir_.path() / "wal.db").string();
    writer_ = OpenDb(path_, WalBufferingVfs());
    // No checkpoint copies the WAL into the database file: a reader finds
    // the commits in the WAL only. synchronous=normal, the store's default:
    // no xSync at a commit writes what was gathered.
    Exec(writer_.get(),
         "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
         "PRAGMA wal_autocheckpoint = 0; "
         "CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)");
    reader_ = OpenDb(path_, nullptr);  // SQLite's default VFS.
  }

  // Commits a row 'kept', then, with a cache of a few pages (the
  // transaction's pages go to the WAL before it ends), inserts `rows` rows
  // of 2000 bytes and rolls them back.
  void KeepOneThenRollBackASpill(int rows) {
    Exec(writer_.get(), "INSERT INTO t VALUES (1, 'kept')");
    Exec(writer_.get(), "PRAGMA cache_size = 2");
    Exec(writer_.get(),
         "BEGIN; WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
         "FROM s WHERE x < " +
             std::to_string(rows) +
             ") INSERT INTO t SELECT x + 10, randomblob(2000) FROM s");
    // SQLite 3.40 reads the database's first page back during this
    // rollback, which writes what was gathered while the transaction still
    // holds the WAL (as SQLite itself writes spilled frames); what a
    // rollback leaves gathered, the release of the WAL's write lock drops.
    Exec(writer_.get(), "ROLLBACK");
  }

  testing::TempDir dir_;
  std::string path_;
  Db writer_;
  Db reader_;
};

TEST_F(SqliteWalVfsTest, AnotherConnectionReadsEachCommitAsItReturns) {
  for (int i = 0; i < 50; ++i) {
    Exec(writer_.get(),
         "INSERT INTO t VALUES (" + std::to_string(i) + ", randomblob(3000))");
    // The writer still holds its WAL file open, with nothing left to write.
    EXPECT_EQ(Select(reader_.get(), "SELECT count(*) FROM t"),
              std::to_string(i + 1));
  }
  EXPECT_EQ(Select(reader_.get(), "PRAGMA integrity_check"), "ok");
}

TEST_F(SqliteWalVfsTest, ATransactionOfManyPagesIsWrittenWhole) {
  // 2 MiB in one commit: far more than is gathered before a write, and than
  // the default VFS writes in one call.
  Exec(writer_.get(),
       "BEGIN; INSERT INTO t VALUES (1, randomblob(2097152)); "
       "INSERT INTO t VALUES (2, zeroblob(300000)); COMMIT");
  EXPECT_EQ(Select(reader_.get(), "SELECT sum(length(v)) FROM t"),
            std::to_string(2097152 + 300000));
  EXPECT_EQ(Select(reader_.get(),
                   "SELECT hex(substr(v, 1000000, 16)) FROM t WHERE k = 1"),
            Select(writer_.get(),
                   "SELECT hex(substr(v, 1000000, 16)) FROM t WHERE k = 1"));
  EXPECT_EQ(Select(reader_.get(), "PRAGMA integrity_check"), "ok");
}

TEST_F(SqliteWalVfsTest, ARolledBackSpillLeavesOnlyWhatWasCommitted) {
  // The next commit overwrites the rolled-back frames.
  KeepOneThenRollBackASpill(200);
  Exec(writer_.get(), "INSERT INTO t VALUES (2, 'after')");
  EXPECT_EQ(Select(reader_.get(), "SELECT group_concat(v, ',') FROM t"),
            "kept,after");
  EXPECT_EQ(Select(reader_.get(), "PRAGMA integrity_check"), "ok");
  // And a checkpoint copies exactly that into the database file.
  Exec(reader_.get(), "PRAGMA wal_checkpoint(TRUNCATE)");
  writer_.reset();
  reader_.reset();
  Db fresh = OpenDb(path_, nullptr);
  EXPECT_EQ(Select(fresh.get(), "SELECT group_concat(v, ',') FROM t"),
            "kept,after");
}

TEST_F(SqliteWalVfsTest, ARolledBackSpillIsNotWrittenOverAnotherCommit) {
  KeepOneThenRollBackASpill(20);
  // Another writer (another process, as far as the file knows) commits
  // where the rolled-back frames were; then the first writes again.
  Db other = OpenDb(path_, WalBufferingVfs());
  Exec(other.get(),
       "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0; "
       "BEGIN; WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
       "FROM s WHERE x < 20) INSERT INTO t SELECT x + 1000, 'other' FROM s; "
       "COMMIT");
  Exec(writer_.get(), "INSERT INTO t VALUES (2, 'after')");
  EXPECT_EQ(Select(reader_.get(), "SELECT count(*) FROM t"), "22");
  EXPECT_EQ(Select(reader_.get(), "PRAGMA integrity_check"), "ok");
  Exec(reader_.get(), "PRAGMA wal_checkpoint(TRUNCATE)");
  other.reset();
  writer_.reset();
  reader_.reset();
  Db fresh = OpenDb(path_, nullptr);
  EXPECT_EQ(Select(fresh.get(), "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(Select(fresh.get(), "SELECT count(*) FROM t WHERE v = 'other'"),
            "20");
}

TEST(SqliteWalVfsStoreTest, TheStoresConnectionsUseIt) {
  testing::TempDir dir;
  SqliteStoreOptions options;
  options.path = (dir.path() / "store.db").string();
  auto conn = Connection::Open(options);
  ASSERT_TRUE(conn.has_value()) << conn.error().ToString();
  sqlite3_vfs* vfs = nullptr;
  ASSERT_EQ(sqlite3_file_control((*conn)->db(), "main",
                                 SQLITE_FCNTL_VFS_POINTER, &vfs),
            SQLITE_OK);
  EXPECT_EQ(vfs, sqlite3_vfs_find(WalBufferingVfs()));
}

}  // namespace
}  // namespace idem::sqlite_internal
