#include "tool_store.h"

#include <gtest/gtest.h>

#ifdef IDEM_IDEMCTL_TEST_POSTGRES
#include "postgres_test_util.h"
#endif
#ifdef IDEM_IDEMCTL_TEST_REDIS
#include "redis_test_util.h"
#endif

namespace idem::testing {

std::string KindName(Kind kind) {
  static constexpr const char* kNames[] = {"Rocksdb", "Sqlite", "Postgres",
                                           "Redis", "RedisCluster"};
  return kNames[static_cast<int>(kind)];
}

void ToolStore::SetUp(Kind kind, std::string_view name) {
  kind_ = kind;
  (void)name;  // Unused when the build has no server store.
  switch (kind) {
    case Kind::kRocksdb:
#ifdef IDEM_IDEMCTL_TEST_ROCKSDB
      uri_ = "rocksdb:" + (dir_.path() / "db").string();
#endif
      break;
    case Kind::kSqlite:
#ifdef IDEM_IDEMCTL_TEST_SQLITE
      uri_ = "sqlite:" + (dir_.path() / "idem.db").string();
#endif
      break;
    case Kind::kPostgres:
#ifdef IDEM_IDEMCTL_TEST_POSTGRES
      IDEM_REQUIRE_TEST_POSTGRES();
      table_ = UniquePostgresTable(name);
      uri_ = WithParams(PostgresTestUri(), "table=" + table_);
#endif
      break;
    case Kind::kRedis:
    case Kind::kRedisCluster:
#ifdef IDEM_IDEMCTL_TEST_REDIS
      if (kind == Kind::kRedis) {
        IDEM_REQUIRE_TEST_REDIS();
        redis_base_ = RedisTestUri();
      } else {
        IDEM_REQUIRE_TEST_REDIS_CLUSTER();
        redis_base_ = RedisClusterTestUri();
      }
      redis_prefix_ = UniqueRedisPrefix(name);
      uri_ = redis_base_ + "?prefix=" + redis_prefix_;
#endif
      break;
  }
  if (uri_.empty()) GTEST_SKIP() << "this build has no such store";
}

void ToolStore::TearDown() {
#ifdef IDEM_IDEMCTL_TEST_REDIS
  if (!redis_prefix_.empty()) DeleteRedisKeys(redis_base_, redis_prefix_);
#endif
#ifdef IDEM_IDEMCTL_TEST_POSTGRES
  if (!table_.empty()) DropPostgresTable(uri_, table_);
#endif
}

}  // namespace idem::testing
