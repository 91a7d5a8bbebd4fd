// See sqlite_wal_vfs.h. Why: under the fresh-key load the writer's thread
// spent about half of its time in the kernel, most of it in pwrite: 4.4
// calls per request, each a system call on a virtual machine
// (benchmarks/http/NOTES.md, "The SQLite writer's WAL writes"). Why not SQLite
// itself: it has no option to gather a transaction's frames (its batch-atomic
// writes are for F2FS only).
//
// How a commit is recognised: SQLite writes a frame as two xWrite calls,
// the 24-byte frame header, then the page; the header of a commit frame
// carries the database's size in pages (bytes 4-7), every other frame's
// zero (https://www.sqlite.org/fileformat.html, "WAL Frame Format"). The
// page that follows such a header ends the gathering: everything gathered
// is written before that xWrite returns. A commit that pads the WAL to a
// sector (synchronous=full) repeats its commit frame; each repeat is
// written the same way, and the xSync after them writes nothing more.

#include "sqlite_wal_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <unordered_set>

namespace idem::sqlite_internal {
namespace {

constexpr int kFrameHeaderSize = 24;
// Beyond this, what is gathered is written (a transaction of many pages);
// a write as large goes straight to the file. Below 128 KiB: the unix VFS
// writes at most 0x1ffff bytes per call (its seekAndWrite masks the length
// to 17 bits, and a longer write comes out as "disk full"), which SQLite's
// own writes (a frame's header or page, 64 KiB at most) never reach.
constexpr std::size_t kMaxGathered = 96 * 1024;

sqlite3_vfs* real_vfs = nullptr;  // Set once, before registration.

// The state of a database file or of a WAL file this VFS opened.
struct FileState {
  sqlite3_file* real = nullptr;  // The default VFS's file (after ShimFile).
  bool wal = false;
  std::string name;  // The database file's path (a WAL's: without "-wal").
  // The connection's other file: a database's WAL, a WAL's database. Set
  // and cleared under LiveMutex(); read by the connection's own calls.
  FileState* peer = nullptr;
  // A WAL's: contiguous bytes from offset `start`, not written yet.
  std::string gathered;
  sqlite3_int64 start = 0;
  bool write_after_next = false;  // A commit frame's header was gathered.
};

// What SQLite allocates (szOsFile bytes) for a file: this, then the
// default VFS's own file.
struct ShimFile {
  sqlite3_file base;
  FileState* state;
};

constexpr std::size_t kRealOffset =
    (sizeof(ShimFile) + alignof(std::max_align_t) - 1) /
    alignof(std::max_align_t) * alignof(std::max_align_t);

FileState& StateOf(sqlite3_file* file) {
  return *reinterpret_cast<ShimFile*>(file)->state;
}

sqlite3_file* RealOf(sqlite3_file* file) { return StateOf(file).real; }

// The database files open, for pairing a WAL with its connection's.
std::mutex& LiveMutex() {
  static std::mutex mu;
  return mu;
}
std::unordered_set<const FileState*>& LiveDatabases() {
  static auto* live = new std::unordered_set<const FileState*>();
  return *live;
}
// The database file this thread locked last: SQLite opens a connection's
// WAL right after taking its database's shared lock, on the same thread.
thread_local const FileState* last_locked = nullptr;

int WriteGathered(FileState& s) {
  if (s.gathered.empty()) return SQLITE_OK;
  const int rc = s.real->pMethods->xWrite(
      s.real, s.gathered.data(), static_cast<int>(s.gathered.size()), s.start);
  // Failed or not, these bytes are done with: SQLite rolls a failed
  // commit back and writes its frames again.
  s.gathered.clear();
  s.write_after_next = false;
  return rc;
}

int Close(sqlite3_file* file) {
  FileState* s = &StateOf(file);
  const int written = s->wal ? WriteGathered(*s) : SQLITE_OK;
  {
    // Under the lock: Pair reads a database's peer.
    std::lock_guard<std::mutex> lock(LiveMutex());
    if (!s->wal) LiveDatabases().erase(s);
    if (s->peer != nullptr) s->peer->peer = nullptr;
  }
  const int closed = s->real->pMethods->xClose(s->real);
  delete s;
  file->pMethods = nullptr;
  return written != SQLITE_OK ? written : closed;
}

int Read(sqlite3_file* file, void* buf, int amount, sqlite3_int64 offset) {
  FileState& s = StateOf(file);
  if (int rc = WriteGathered(s); rc != SQLITE_OK) return rc;
  return s.real->pMethods->xRead(s.real, buf, amount, offset);
}

int Write(sqlite3_file* file, const void* buf, int amount,
          sqlite3_int64 offset) {
  FileState& s = StateOf(file);
  if (!s.wal || s.peer == nullptr) {
    // A database file, or a WAL whose connection was not recognised (see
    // Open): nothing can drop what a rolled-back transaction gathered.
    return s.real->pMethods->xWrite(s.real, buf, amount, offset);
  }
  const auto* bytes = static_cast<const unsigned char*>(buf);
  const bool commit_header = amount == kFrameHeaderSize &&
                             (bytes[4] | bytes[5] | bytes[6] | bytes[7]) != 0;
  const auto size = static_cast<std::size_t>(amount);
  if (!s.gathered.empty() &&
      (offset != s.start + static_cast<sqlite3_int64>(s.gathered.size()) ||
       s.gathered.size() + size > kMaxGathered)) {
    const bool was_commit = s.write_after_next;
    if (int rc = WriteGathered(s); rc != SQLITE_OK) return rc;
    s.write_after_next = was_commit;
  }
  if (size > kMaxGathered) {
    s.write_after_next = false;
    return s.real->pMethods->xWrite(s.real, buf, amount, offset);
  }
  if (s.gathered.empty()) s.start = offset;
  try {
    s.gathered.append(reinterpret_cast<const char*>(bytes), size);
  } catch (const std::bad_alloc&) {
    if (int rc = WriteGathered(s); rc != SQLITE_OK) return rc;
    return s.real->pMethods->xWrite(s.real, buf, amount, offset);
  }
  if (s.write_after_next) return WriteGathered(s);  // The commit's page.
  s.write_after_next = commit_header;
  return SQLITE_OK;
}

int Truncate(sqlite3_file* file, sqlite3_int64 size) {
  FileState& s = StateOf(file);
  if (int rc = WriteGathered(s); rc != SQLITE_OK) return rc;
  return s.real->pMethods->xTruncate(s.real, size);
}

int Sync(sqlite3_file* file, int flags) {
  FileState& s = StateOf(file);
  if (int rc = WriteGathered(s); rc != SQLITE_OK) return rc;
  return s.real->pMethods->xSync(s.real, flags);
}

int FileSize(sqlite3_file* file, sqlite3_int64* size) {
  FileState& s = StateOf(file);
  if (int rc = WriteGathered(s); rc != SQLITE_OK) return rc;
  return s.real->pMethods->xFileSize(s.real, size);
}

int Lock(sqlite3_file* file, int level) {
  FileState& s = StateOf(file);
  if (!s.wal) last_locked = &s;
  return s.real->pMethods->xLock(s.real, level);
}

int Unlock(sqlite3_file* file, int level) {
  sqlite3_file* real = RealOf(file);
  return real->pMethods->xUnlock(real, level);
}

int CheckReservedLock(sqlite3_file* file, int* out) {
  sqlite3_file* real = RealOf(file);
  return real->pMethods->xCheckReservedLock(real, out);
}

int FileControl(sqlite3_file* file, int op, void* arg) {
  FileState& s = StateOf(file);
  if (int rc = WriteGathered(s); rc != SQLITE_OK) return rc;
  return s.real->pMethods->xFileControl(s.real, op, arg);
}

int SectorSize(sqlite3_file* file) {
  sqlite3_file* real = RealOf(file);
  return real->pMethods->xSectorSize(real);
}

int DeviceCharacteristics(sqlite3_file* file) {
  sqlite3_file* real = RealOf(file);
  return real->pMethods->xDeviceCharacteristics(real);
}

int ShmMap(sqlite3_file* file, int region, int size, int extend,
           void volatile** out) {
  sqlite3_file* real = RealOf(file);
  return real->pMethods->xShmMap(real, region, size, extend, out);
}

// The first of the WAL index's locks (wal.c: WAL_WRITE_LOCK), which a
// connection holds while it writes frames.
constexpr int kWalWriteLock = 0;

int ShmLock(sqlite3_file* file, int offset, int n, int flags) {
  FileState& s = StateOf(file);
  if (!s.wal && s.peer != nullptr &&
      flags == (SQLITE_SHM_UNLOCK | SQLITE_SHM_EXCLUSIVE) &&
      offset <= kWalWriteLock && kWalWriteLock < offset + n) {
    // The connection lets go of the WAL: a commit wrote what it gathered,
    // so what is left belongs to a transaction rolled back. Never written:
    // the next writer (another connection, another process) may put its
    // own frames there.
    s.peer->gathered.clear();
    s.peer->write_after_next = false;
  }
  return s.real->pMethods->xShmLock(s.real, offset, n, flags);
}

void ShmBarrier(sqlite3_file* file) {
  sqlite3_file* real = RealOf(file);
  real->pMethods->xShmBarrier(real);
}

int ShmUnmap(sqlite3_file* file, int delete_flag) {
  sqlite3_file* real = RealOf(file);
  return real->pMethods->xShmUnmap(real, delete_flag);
}

int Fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** out) {
  FileState& s = StateOf(file);
  if (int rc = WriteGathered(s); rc != SQLITE_OK) return rc;
  return s.real->pMethods->xFetch(s.real, offset, amount, out);
}

int Unfetch(sqlite3_file* file, sqlite3_int64 offset, void* p) {
  sqlite3_file* real = RealOf(file);
  return real->pMethods->xUnfetch(real, offset, p);
}

const sqlite3_io_methods kMethods = {
    3,
    Close,
    Read,
    Write,
    Truncate,
    Sync,
    FileSize,
    Lock,
    Unlock,
    CheckReservedLock,
    FileControl,
    SectorSize,
    DeviceCharacteristics,
    ShmMap,
    ShmLock,
    ShmBarrier,
    ShmUnmap,
    Fetch,
    Unfetch,
};

// Pairs a WAL with the database file its connection locked just before
// opening it, if that is its database and has no WAL yet.
void Pair(FileState& wal) {
  constexpr std::string_view kSuffix = "-wal";
  if (wal.name.size() <= kSuffix.size() ||
      wal.name.compare(wal.name.size() - kSuffix.size(), kSuffix.size(),
                       kSuffix) != 0) {
    return;
  }
  wal.name.resize(wal.name.size() - kSuffix.size());
  std::lock_guard<std::mutex> lock(LiveMutex());
  if (last_locked == nullptr || LiveDatabases().count(last_locked) == 0) {
    return;
  }
  auto* db = const_cast<FileState*>(last_locked);
  if (db->peer != nullptr || db->name != wal.name) return;
  db->peer = &wal;
  wal.peer = db;
}

int Open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags,
         int* out_flags) {
  const bool wal = (flags & SQLITE_OPEN_WAL) != 0;
  if (name == nullptr || (!wal && (flags & SQLITE_OPEN_MAIN_DB) == 0)) {
    // Journals, temporary files: the default VFS's own, in the same memory.
    return real_vfs->xOpen(real_vfs, name, file, flags, out_flags);
  }
  auto* shim = reinterpret_cast<ShimFile*>(file);
  shim->base.pMethods = nullptr;
  auto* real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) +
                                               kRealOffset);
  real->pMethods = nullptr;
  const int rc = real_vfs->xOpen(real_vfs, name, real, flags, out_flags);
  if (rc != SQLITE_OK) {
    if (real->pMethods != nullptr) real->pMethods->xClose(real);
    return rc;
  }
  if (real->pMethods->iVersion < kMethods.iVersion) {
    // Another default VFS, older than these methods: left alone.
    real->pMethods->xClose(real);
    return real_vfs->xOpen(real_vfs, name, file, flags, out_flags);
  }
  auto* state = new (std::nothrow) FileState;
  if (state == nullptr) {
    real->pMethods->xClose(real);
    return SQLITE_NOMEM;
  }
  state->real = real;
  state->wal = wal;
  try {
    state->name = name;
    if (wal) {
      Pair(*state);
    } else {
      std::lock_guard<std::mutex> lock(LiveMutex());
      LiveDatabases().insert(state);
    }
  } catch (const std::bad_alloc&) {
    delete state;
    real->pMethods->xClose(real);
    return SQLITE_NOMEM;
  }
  shim->state = state;
  shim->base.pMethods = &kMethods;
  return SQLITE_OK;
}

}  // namespace

const char* WalBufferingVfs() {
  static const char* const name = []() -> const char* {
    sqlite3_vfs* real = sqlite3_vfs_find(nullptr);
    if (real == nullptr || real->szOsFile < 0) return nullptr;
    real_vfs = real;
    // The default VFS's other methods as they are: they are called with
    // this VFS, whose fields (mxPathname, pAppData) are the default's.
    static sqlite3_vfs vfs = *real;
    vfs.pNext = nullptr;
    vfs.zName = "idem-wal-gather";
    vfs.szOsFile = static_cast<int>(
        std::max<std::size_t>(static_cast<std::size_t>(real->szOsFile),
                              kRealOffset + real->szOsFile));
    vfs.xOpen = Open;
    if (sqlite3_vfs_register(&vfs, /*makeDflt=*/0) != SQLITE_OK) return nullptr;
    return vfs.zName;
  }();
  return name;
}

}  // namespace idem::sqlite_internal
