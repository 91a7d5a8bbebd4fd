// What the Redis store's own tests share: the ids, fingerprints and time
// they claim with, opening a store, and a fixture with a store under a
// prefix of its own on the shared server (IDEM_TEST_REDIS_URI).
//
// Thread-safety: as gtest fixtures are.

#ifndef IDEM_TESTS_BACKENDS_REDIS_REDIS_STORE_FIXTURE_H_
#define IDEM_TESTS_BACKENDS_REDIS_REDIS_STORE_FIXTURE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "idem/clock.h"
#include "idem/open_store.h"
#include "idem/redis_store.h"
#include "idem/store.h"
#include "idem/store_uri.h"
#include "redis_test_util.h"

namespace idem::testing {

inline const TimePoint kRedisT0 = TimePoint(std::chrono::hours(24 * 365 * 56));

inline Fingerprint Fp(int n) {
  Fingerprint fp;
  fp.bytes[0] = static_cast<std::uint8_t>(n);
  return fp;
}

inline RecordId Id(int n) {
  RecordId id;
  id.bytes[0] = static_cast<std::uint8_t>(n);
  id.bytes[31] = 0x5a;
  return id;
}

// The store OpenStore opens for `uri`, without a sweeper; nullptr (and a
// test failure) when it does not open.
inline std::unique_ptr<Store> MustOpen(const std::string& uri) {
  auto store = OpenStore(uri, {.sweep_interval = Duration::zero()});
  EXPECT_TRUE(store.has_value()) << store.error().ToString();
  return store ? std::move(*store) : nullptr;
}

// The RedisStore itself (for its test hooks).
inline std::unique_ptr<RedisStore> MustOpenRedis(const std::string& uri) {
  auto parsed = StoreUri::Parse(uri);
  EXPECT_TRUE(parsed.has_value()) << parsed.error().ToString();
  if (!parsed) return nullptr;
  auto store = RedisStore::OpenFromUri(*parsed, {});
  EXPECT_TRUE(store.has_value()) << store.error().ToString();
  if (!store) return nullptr;
  return std::unique_ptr<RedisStore>(
      static_cast<RedisStore*>(store->release()));
}

// A store on the shared server under a prefix of its own, deleted after.
class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    IDEM_REQUIRE_TEST_REDIS();
    base_ = RedisTestUri();
    server_ = RedisServersOf(base_).at(0);
    prefix_ = UniqueRedisPrefix("store");
    store_ = MustOpen(Uri());
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override {
    store_.reset();
    if (!prefix_.empty()) DeleteRedisKeys(base_, prefix_);
  }
  // The URI of another store on the same keys.
  std::string Uri() const { return base_ + "?prefix=" + prefix_; }
  std::string Key(const RecordId& id) const {
    return prefix_ + "{" + id.ToHex() + "}";
  }
  // The value of `id`'s key, as the server has it.
  std::string Value(const RecordId& id) const {
    return RedisRaw(server_, {"GET", Key(id)}).text;
  }

  std::string base_, server_, prefix_;
  std::unique_ptr<Store> store_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_BACKENDS_REDIS_REDIS_STORE_FIXTURE_H_
