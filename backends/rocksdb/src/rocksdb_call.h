// How the RocksDB store calls into RocksDB and reports what it says: every
// call goes through RocksdbCall (every public method through the store's
// StoreBoundary), and a failed rocksdb::Status becomes an Error naming the
// directory.

#ifndef IDEM_BACKENDS_ROCKSDB_ROCKSDB_CALL_H_
#define IDEM_BACKENDS_ROCKSDB_ROCKSDB_CALL_H_

#include <rocksdb/slice.h>
#include <rocksdb/status.h>

#include <string>
#include <string_view>
#include <utility>

#include "idem/error.h"
#include "idem/types.h"

namespace idem::rocksdb_internal {

inline rocksdb::Slice KeyOf(const RecordId& id) {
  return rocksdb::Slice(reinterpret_cast<const char*>(id.bytes.data()),
                        RecordId::kSize);
}

inline std::string_view View(const rocksdb::Slice& s) {
  return std::string_view(s.data(), s.size());
}

// "rocksdb store '<path>': ", the start of every message.
std::string Prefix(const std::string& path);

// Corruption -> kDataLoss; IOError, Busy, TimedOut, TryAgain ->
// kUnavailable; anything else -> kInternal.
Error StatusError(const std::string& path, std::string_view what,
                  const rocksdb::Status& s);

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's dynamic annotations (exported by its runtime).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

// Every call into RocksDB goes through here. Under ThreadSanitizer the
// memory accesses made during the call are not tracked (see
// __tsan_default_suppressions in rocksdb_call.cc for why); locks taken
// inside still are.
template <typename Fn>
auto RocksdbCall(Fn&& fn) {
#if defined(__SANITIZE_THREAD__)
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  struct End {
    ~End() {
      AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
      AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    }
  } end;
#endif
  return fn();
}

}  // namespace idem::rocksdb_internal

#endif  // IDEM_BACKENDS_ROCKSDB_ROCKSDB_CALL_H_
