// The stores the tool tests (idemctl_test.cc, sealed_responses_test.cc) run
// a tool against: one fresh store of each kind per test, a database in a
// directory of the test's own, a fresh PostgreSQL table, a fresh Redis
// prefix. Which kinds a binary has: IDEM_IDEMCTL_TEST_<KIND>, set by CMake.
//
// Thread-safety: one thread.

#ifndef IDEM_TESTS_TOOLS_TOOL_STORE_H_
#define IDEM_TESTS_TOOLS_TOOL_STORE_H_

#include <string>
#include <string_view>

#include "support/temp_dir.h"

namespace idem::testing {

enum class Kind { kRocksdb, kSqlite, kPostgres, kRedis, kRedisCluster };

// "Rocksdb", ..., for test names.
std::string KindName(Kind kind);

class ToolStore {
 public:
  // Sets uri() for a fresh store of `kind` (`name` in its table's or
  // prefix's name), or skips (under CI, for a missing server, fails) when
  // the build or the environment lacks the kind's store. Call it from the
  // test's SetUp.
  void SetUp(Kind kind, std::string_view name);
  // Drops the table, deletes the prefix's keys.
  void TearDown();

  const std::string& uri() const { return uri_; }
  Kind kind() const { return kind_; }
  // An embedded store's directory.
  const TempDir& dir() const { return dir_; }

  std::string table_;  // PostgreSQL's; empty for other kinds.
  std::string redis_base_, redis_prefix_;  // Redis's; empty for others.

 private:
  Kind kind_ = Kind::kSqlite;
  TempDir dir_;
  std::string uri_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_TOOLS_TOOL_STORE_H_
