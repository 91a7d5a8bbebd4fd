// The VFS that gathers a connection's WAL writes (sqlite_wal_vfs.h): every
// committed transaction is in the file when its COMMIT returns, whatever
// its size, so that another connection on the default VFS (another
// process, idemctl) reads exactly what was committed; a transaction rolled
// back after its pages spilled into the WAL leaves nothing behind (through
// SQLite, and through the VFS's own methods, where nothing reads the WAL
// back before the write lock is released); and the store's connections use
// it.

#include "sqlite_wal_vfs.h"

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

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

// A file of the VFS, opened through its own xOpen (not through SQLite), in
// memory of the VFS's size; closed at the end of the test.
class VfsFile {
 public:
  VfsFile(sqlite3_vfs* vfs, sqlite3_filename name, int flags)
      : memory_((static_cast<std::size_t>(vfs->szOsFile) +
                 sizeof(std::max_align_t) - 1) /
                sizeof(std::max_align_t)) {
    int out_flags = 0;
    open_rc_ = vfs->xOpen(vfs, name, file(), flags, &out_flags);
  }
  ~VfsFile() {
    if (open_rc_ == SQLITE_OK) file()->pMethods->xClose(file());
  }
  VfsFile(const VfsFile&) = delete;
  VfsFile& operator=(const VfsFile&) = delete;

  int open_rc() const { return open_rc_; }
  sqlite3_file* file() {
    return reinterpret_cast<sqlite3_file*>(memory_.data());
  }
  const sqlite3_io_methods& methods() { return *file()->pMethods; }
  // Closes it now (what a connection's close does).
  int Close() {
    open_rc_ = SQLITE_CANTOPEN;
    return file()->pMethods->xClose(file());
  }

 private:
  std::vector<std::max_align_t> memory_;
  int open_rc_ = SQLITE_CANTOPEN;
};

// What a connection does around a write transaction in WAL mode, made
// through the VFS's methods: the database file's shared lock, its WAL
// opened next (so the two are paired), the WAL index mapped, its write lock
// taken. Then `frames` WAL frames are written, each a 24-byte header and a
// page; the last is a commit frame when `commit`. Returns the WAL's size on
// disk after the frames, after the write lock's release, and after the
// WAL's close.
struct WalSizes {
  std::uintmax_t after_frames = 0;
  std::uintmax_t after_unlock = 0;
  std::uintmax_t after_close = 0;
};
WalSizes WriteFramesThenUnlock(const std::string& path, int frames,
                               bool commit) {
  constexpr int kPage = 4096;
  sqlite3_vfs* vfs = sqlite3_vfs_find(WalBufferingVfs());
  EXPECT_NE(vfs, nullptr);
  WalSizes sizes;
  if (vfs == nullptr) return sizes;
  struct FreeFilename {
    void operator()(const char* name) const { sqlite3_free_filename(name); }
  };
  const std::unique_ptr<const char, FreeFilename> name(
      sqlite3_create_filename(path.c_str(), (path + "-journal").c_str(),
                              (path + "-wal").c_str(), 0, nullptr));
  const std::filesystem::path wal_path = path + "-wal";
  {
    VfsFile db(
        vfs, name.get(),
        SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    EXPECT_EQ(db.open_rc(), SQLITE_OK);
    if (db.open_rc() != SQLITE_OK) return sizes;
    EXPECT_EQ(db.methods().xLock(db.file(), SQLITE_LOCK_SHARED), SQLITE_OK);
    VfsFile wal(vfs, sqlite3_filename_wal(name.get()),
                SQLITE_OPEN_WAL | SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    EXPECT_EQ(wal.open_rc(), SQLITE_OK);
    if (wal.open_rc() != SQLITE_OK) return sizes;
    void volatile* index = nullptr;
    EXPECT_EQ(db.methods().xShmMap(db.file(), 0, 32768, 1, &index), SQLITE_OK);
    EXPECT_EQ(db.methods().xShmLock(db.file(), 0, 1,
                                    SQLITE_SHM_LOCK | SQLITE_SHM_EXCLUSIVE),
              SQLITE_OK);
    std::vector<unsigned char> header(24, 0);
    const std::vector<unsigned char> page(kPage, 0xab);
    for (int i = 0; i < frames; ++i) {
      const sqlite3_int64 at = 32 + i * sqlite3_int64{24 + kPage};
      header[0] = static_cast<unsigned char>(i + 1);  // The page number.
      header[7] = commit && i == frames - 1 ? 1 : 0;  // Database size.
      EXPECT_EQ(wal.methods().xWrite(wal.file(), header.data(), 24, at),
                SQLITE_OK);
      EXPECT_EQ(wal.methods().xWrite(wal.file(), page.data(), kPage, at + 24),
                SQLITE_OK);
    }
    sizes.after_frames = std::filesystem::file_size(wal_path);
    EXPECT_EQ(db.methods().xShmLock(db.file(), 0, 1,
                                    SQLITE_SHM_UNLOCK | SQLITE_SHM_EXCLUSIVE),
              SQLITE_OK);
    sizes.after_unlock = std::filesystem::file_size(wal_path);
    EXPECT_EQ(wal.Close(), SQLITE_OK);
    sizes.after_close = std::filesystem::file_size(wal_path);
    EXPECT_EQ(db.methods().xShmUnmap(db.file(), 1), SQLITE_OK);
    EXPECT_EQ(db.methods().xUnlock(db.file(), SQLITE_LOCK_NONE), SQLITE_OK);
  }
  return sizes;
}

// A transaction that spilled frames and then rolled back without reading
// the WAL: its frames are gathered, never written, and dropped when the
// connection releases the WAL's write lock, so that closing the WAL (or
// anything else that writes what is gathered) cannot put them on frames
// another writer committed meanwhile.
TEST(SqliteWalVfsMethodsTest, ReleasingTheWriteLockDropsWhatARollbackLeft) {
  testing::TempDir dir;
  const WalSizes sizes =
      WriteFramesThenUnlock((dir.path() / "rolled-back.db").string(), 3,
                            /*commit=*/false);
  EXPECT_EQ(sizes.after_frames, 0u);  // Gathered, not written.
  EXPECT_EQ(sizes.after_unlock, 0u);
  EXPECT_EQ(sizes.after_close, 0u);  // Dropped, so the close wrote nothing.
}

// The same frames ending in a commit frame are in the file when the
// commit frame's page is written: nothing is left for the release to drop.
TEST(SqliteWalVfsMethodsTest, ACommitFramesPageWritesEveryFrame) {
  testing::TempDir dir;
  const WalSizes sizes = WriteFramesThenUnlock(
      (dir.path() / "committed.db").string(), 3, /*commit=*/true);
  const std::uintmax_t frames_end = 32 + 3 * (24 + 4096);
  EXPECT_EQ(sizes.after_frames, frames_end);
  EXPECT_EQ(sizes.after_unlock, frames_end);
  EXPECT_EQ(sizes.after_close, frames_end);
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
