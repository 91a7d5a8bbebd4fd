// The values of idem-demo's --http that the process tests (crash,
// multi-instance) run the demo with: every server the build has. Targets
// built with RESTinio define IDEM_TEST_DEMO_RESTINIO=1.

#ifndef IDEM_TESTS_SUPPORT_DEMO_HTTP_FLAGS_H_
#define IDEM_TESTS_SUPPORT_DEMO_HTTP_FLAGS_H_

#include <string>
#include <vector>

namespace idem::testing {

inline std::vector<std::string> DemoHttpFlags() {
  return {
    "beast",
#if IDEM_TEST_DEMO_RESTINIO
        "restinio",
#endif
  };
}

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_DEMO_HTTP_FLAGS_H_
