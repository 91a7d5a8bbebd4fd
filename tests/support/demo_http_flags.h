// The values of idem-demo's --http that the process tests (crash,
// multi-instance) run the demo with: every server the build has, and the
// test names of their parameters. Targets built with RESTinio define
// IDEM_TEST_DEMO_RESTINIO=1.

#ifndef IDEM_TESTS_SUPPORT_DEMO_HTTP_FLAGS_H_
#define IDEM_TESTS_SUPPORT_DEMO_HTTP_FLAGS_H_

#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace idem::testing {

inline std::vector<std::string> DemoHttpFlags() {
  return {
    "beast",
#if IDEM_TEST_DEMO_RESTINIO
        "restinio",
#endif
  };
}

// The name of a (store case, --http value) test parameter, as the process
// tests combine them with DemoHttpFlags(): "<case name>_<http>". StoreCase
// has a `const char* name`.
template <typename StoreCase>
std::string StoreAndHttpName(
    const ::testing::TestParamInfo<std::tuple<StoreCase, std::string>>& info) {
  return std::string(std::get<0>(info.param).name) + "_" +
         std::get<1>(info.param);
}

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_DEMO_HTTP_FLAGS_H_
