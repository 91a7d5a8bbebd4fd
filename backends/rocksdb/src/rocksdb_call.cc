#include "rocksdb_call.h"

namespace idem::rocksdb_internal {

std::string Prefix(const std::string& path) {
  return "rocksdb store '" + path + "': ";
}

Error StatusError(const std::string& path, std::string_view what,
                  const rocksdb::Status& s) {
  ErrorCode code = ErrorCode::kInternal;
  if (s.IsCorruption()) {
    code = ErrorCode::kDataLoss;
  } else if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) {
    code = ErrorCode::kUnavailable;
  }
  return Error(code, Prefix(path) + std::string(what) + ": " + s.ToString());
}

}  // namespace idem::rocksdb_internal

#if defined(__SANITIZE_THREAD__)
// RocksDB as Debian ships it is not built with ThreadSanitizer: its lock-free
// memtable, write group commit and caches synchronize with atomics TSan
// cannot see, so concurrent Gets and Puts look like races. RocksDB's own
// frames are also missing from TSan's stacks, and the std::string code it
// runs resolves to the instrumented copies in the executable, so a report
// can show idem's frames only. Hence RocksdbCall ignores the accesses made
// during a call, and reports with a RocksDB frame on either side (its
// background threads) are suppressed in every binary that links this store.
// Races between idem's own accesses are still reported. Weak, so an
// application's own list takes precedence.
extern "C" __attribute__((weak)) const char* __tsan_default_suppressions() {
  return "called_from_lib:librocksdb.so\n"
         "race:librocksdb.so\n";
}
#endif
