// A fixture around a database server of the test's own (PrivatePostgres,
// PrivateRedis: anything with Start() and error()), for the tests that stop
// and restart it (the outage tests): started in SetUp, and stores opened on
// it without a sweeper.

#ifndef IDEM_TESTS_SUPPORT_PRIVATE_SERVER_TEST_H_
#define IDEM_TESTS_SUPPORT_PRIVATE_SERVER_TEST_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "idem/open_store.h"
#include "idem/store.h"

namespace idem::testing {

template <typename Server>
class PrivateServerTest : public ::testing::Test {
 protected:
  // `what` names the server in the skip message ("PostgreSQL server").
  explicit PrivateServerTest(std::string what) : what_(std::move(what)) {}

  void SetUp() override {
    if (!server_.Start()) {
      // Like the shared servers: CI must not pass without it.
      if (std::getenv("CI") != nullptr) FAIL() << server_.error();
      GTEST_SKIP() << "no private " << what_ << ": " << server_.error();
    }
  }

  // The store at `uri` (on server_), or null with a failed expectation. No
  // sweeper: the records' times are far in the system clock's past.
  std::shared_ptr<Store> OpenOn(const std::string& uri) {
    auto store = OpenStore(uri, {.sweep_interval = Duration::zero()});
    EXPECT_TRUE(store.has_value()) << store.error().ToString();
    return store.has_value() ? std::shared_ptr<Store>(std::move(*store))
                             : nullptr;
  }

  Server server_;

 private:
  std::string what_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_PRIVATE_SERVER_TEST_H_
