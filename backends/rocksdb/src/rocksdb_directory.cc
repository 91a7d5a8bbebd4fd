#include "rocksdb_directory.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <rocksdb/db.h>

#include "rocksdb_call.h"

namespace idem::rocksdb_internal {
namespace {

// Whether `name` is a file RocksDB writes into its directory (what an
// interrupted first open may leave behind without a CURRENT file yet), or
// the lost+found of a file system mounted there for the database.
bool IsRocksdbFileName(const std::string& name) {
  if (name == "lost+found") return true;
  if (name == "LOCK" || name == "IDENTITY" || name == "LOG" ||
      name.rfind("LOG.old.", 0) == 0 || name.rfind("MANIFEST-", 0) == 0 ||
      name.rfind("OPTIONS-", 0) == 0) {
    return true;
  }
  // 000012.log, 000013.sst, 000014.dbtmp
  const std::size_t dot = name.find('.');
  if (dot == 0 || dot == std::string::npos) return false;
  const std::string ext = name.substr(dot + 1);
  if (ext != "log" && ext != "sst" && ext != "dbtmp") return false;
  return std::all_of(name.begin(), name.begin() + dot,
                     [](char c) { return c >= '0' && c <= '9'; });
}

// A directory entry that shows `path` is not a RocksDB database (e.g.
// `rocksdb:/`, which would scatter RocksDB files over /), or nullopt: the
// directory is missing or empty, holds a database (CURRENT), or only the
// files of one being created.
std::optional<std::string> ForeignEntry(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return std::nullopt;
  if (std::filesystem::exists(std::filesystem::path(path) / "CURRENT", ec)) {
    return std::nullopt;
  }
  std::filesystem::directory_iterator it(path, ec);
  if (ec) return std::nullopt;  // Unreadable: RocksDB's open reports it.
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return std::nullopt;
    const std::string name = it->path().filename().string();
    if (!IsRocksdbFileName(name)) return name;
  }
  return std::nullopt;
}

// PrepareDirectory with create = false.
Status CheckExisting(const std::string& path, const std::string& family) {
  auto missing = [&](const std::string& what) {
    return MakeError(
        ErrorCode::kUnavailable,
        Prefix(path) + what + " (create=false: nothing is created)");
  };
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return missing("does not exist");
  if (!std::filesystem::is_directory(path, ec)) {
    return missing("is not a directory");
  }
  if (!std::filesystem::exists(std::filesystem::path(path) / "CURRENT", ec)) {
    return missing("holds no RocksDB database (no CURRENT file)");
  }
  std::vector<std::string> families;
  const rocksdb::Status s = RocksdbCall([&] {
    return rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path,
                                           &families);
  });
  if (!s.ok()) return tl::unexpected(StatusError(path, "open", s));
  if (std::find(families.begin(), families.end(), family) == families.end()) {
    return missing("holds a RocksDB database without idem's column family '" +
                   family + "'");
  }
  return {};
}

}  // namespace

Status PrepareDirectory(const std::string& path, bool create,
                        const std::string& family) {
  if (!create) return CheckExisting(path, family);
  std::error_code ec;
  if (std::filesystem::exists(path, ec) &&
      !std::filesystem::is_directory(path, ec)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     Prefix(path) + "exists and is not a directory");
  }
  if (std::optional<std::string> other = ForeignEntry(path)) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        Prefix(path) + "holds other files (e.g. '" + *other +
            "') but no RocksDB database (no CURRENT file); refusing to "
            "write RocksDB files into it: give an empty or new directory");
  }
  std::filesystem::create_directories(path, ec);
  if (ec) {
    return MakeError(
        ErrorCode::kUnavailable,
        Prefix(path) + "cannot create the directory: " + ec.message());
  }
  return {};
}

}  // namespace idem::rocksdb_internal
