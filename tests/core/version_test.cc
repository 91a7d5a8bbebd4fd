#include "idem/version.h"

#include <gtest/gtest.h>

#include <string>

namespace idem {
namespace {

TEST(VersionTest, LibraryMatchesTheHeaderItWasBuiltWith) {
  EXPECT_EQ(Version(), IDEM_VERSION);
}

TEST(VersionTest, StringIsMadeOfTheComponents) {
  const std::string expected = std::to_string(IDEM_VERSION_MAJOR) + "." +
                               std::to_string(IDEM_VERSION_MINOR) + "." +
                               std::to_string(IDEM_VERSION_PATCH);
  EXPECT_EQ(IDEM_VERSION, expected);
  EXPECT_EQ(IDEM_VERSION_NUMBER, IDEM_VERSION_MAJOR * 10000 +
                                     IDEM_VERSION_MINOR * 100 +
                                     IDEM_VERSION_PATCH);
}

// The number must order as the version does, for #if checks: a minor or
// patch of 99 must not reach the next major or minor.
static_assert(IDEM_VERSION_MINOR < 100 && IDEM_VERSION_PATCH < 100);

}  // namespace
}  // namespace idem
