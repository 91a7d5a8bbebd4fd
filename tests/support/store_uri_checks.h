// Checks of OpenStore(uri) that the store tests repeat per backend: a URI
// that opens a store with the expected Info, a URI refused with
// kInvalidArgument that names the scheme and never the password, and a
// relative path resolved against the working directory.

#ifndef IDEM_TESTS_SUPPORT_STORE_URI_CHECKS_H_
#define IDEM_TESTS_SUPPORT_STORE_URI_CHECKS_H_

#include <filesystem>
#include <string>
#include <string_view>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "idem/error.h"
#include "idem/open_store.h"
#include "idem/store.h"

namespace idem::testing {

// The error OpenStore(uri) fails with; a failed expectation (and a
// kInternal error) when it opens.
inline Error OpenStoreError(const std::string& uri,
                            const StoreOptions& options = {}) {
  auto store = OpenStore(uri, options);
  EXPECT_FALSE(store.has_value()) << uri;
  if (store.has_value()) return Error(ErrorCode::kInternal, "opened");
  return store.error();
}

// OpenStore(uri) opens a store whose Info is `name`, `durable` and
// `shared_across_processes`.
inline void ExpectOpensFromUri(const std::string& uri, std::string_view name,
                               bool durable, bool shared_across_processes) {
  SCOPED_TRACE(uri);
  auto store = OpenStore(uri);
  ASSERT_TRUE(store.has_value()) << store.error().ToString();
  EXPECT_EQ((*store)->Info().name, name);
  EXPECT_EQ((*store)->Info().durable, durable);
  EXPECT_EQ((*store)->Info().shared_across_processes, shared_across_processes);
}

// OpenStore(uri) fails with kInvalidArgument, and its message names
// `named` (the scheme, a parameter) and not "secret" (the password the bad
// URIs carry).
inline void ExpectInvalidUri(const std::string& uri, std::string_view named) {
  SCOPED_TRACE(uri);
  const Error e = OpenStoreError(uri);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.ToString();
  EXPECT_THAT(e.message(), ::testing::HasSubstr(std::string(named)));
  EXPECT_THAT(e.message(), ::testing::Not(::testing::HasSubstr("secret")));
}

// OpenStore(uri) succeeds with `cwd` as the working directory (restored
// after): `uri` holds a relative path, which the caller then finds below
// `cwd`.
inline void ExpectOpensInWorkingDirectory(const std::filesystem::path& cwd,
                                          const std::string& uri) {
  const auto before = std::filesystem::current_path();
  std::filesystem::current_path(cwd);
  {
    auto store = OpenStore(uri);
    EXPECT_TRUE(store.has_value()) << store.error().ToString();
  }
  std::filesystem::current_path(before);
}

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_STORE_URI_CHECKS_H_
