// The VFS the SQLite store opens its connections with: SQLite's default VFS,
// except that a connection's writes to the WAL file are gathered in memory
// and written with one pwrite per commit instead of two per frame (SQLite
// writes each frame's 24-byte header and its page separately).
//
// What stays exactly as with the default VFS:
//  - Visibility. A commit's frames reach the file inside the write of the
//    commit frame's page, before SQLite publishes the commit in the shared
//    WAL index; a failed write fails that xWrite, so the commit fails
//    (nothing published). Other connections and processes (the
//    checkpointer, idemctl, another process on the same file) only read
//    frames a published commit covers.
//  - Durability. Every xSync (synchronous=full, checkpoints) writes what is
//    gathered first. A crash loses only frames of a commit that never
//    returned.
//  - The connection's own reads of the WAL, its size and truncation: each
//    writes what is gathered first.
// The database file passes through to the default VFS, except that the
// release of the WAL's write lock (the end of a write transaction) drops
// what a rolled-back transaction left gathered: the next writer may put
// its frames where those were. Journals and temporary files are the
// default VFS's own. A WAL whose database this VFS cannot tell (see
// Pair in the .cc) is written through, as the default VFS would.
//
// Thread-safety: registered once per process (thread-safe); a WAL file
// belongs to one connection, which SQLite uses from one thread at a time.

#ifndef IDEM_BACKENDS_SQLITE_SQLITE_WAL_VFS_H_
#define IDEM_BACKENDS_SQLITE_SQLITE_WAL_VFS_H_

namespace idem::sqlite_internal {

// The name to pass to sqlite3_open_v2, registering the VFS at the first
// call; nullptr (SQLite's default VFS) if it could not be registered.
const char* WalBufferingVfs();

}  // namespace idem::sqlite_internal

#endif  // IDEM_BACKENDS_SQLITE_SQLITE_WAL_VFS_H_
