// A suite that runs the real idem-demo process on each server of
// HttpServers() (its --http), over the memory store, with its log in the
// test's own directory. For tests built with RUNS_DEMO (IDEM_DEMO_PATH).
//
// Thread-safety: one test's thread.

#ifndef IDEM_TESTS_HTTP_DEMO_PROCESS_SUITE_H_
#define IDEM_TESTS_HTTP_DEMO_PROCESS_SUITE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "http_test_util.h"
#include "support/built_path.h"
#include "support/demo_process.h"
#include "support/temp_dir.h"

namespace idem::testing {

class DemoProcessOnEachServer : public HttpServerTest {
 protected:
  // Starts idem-demo with `args` and this test's --http; its port, or 0
  // when it did not say it listens (bad flags: see Log()).
  std::uint16_t Start(std::vector<std::string> args) {
    args.push_back("--http");
    args.push_back(HttpFlag(GetParam()));
    demo_.emplace(::idem::testing::BuiltPath(IDEM_DEMO_PATH),
                  "memory:", dir_.path() / "demo.log", args);
    return demo_->WaitListening();
  }
  // Its stderr so far.
  std::string Log() { return proc::ReadFile(dir_.path() / "demo.log"); }

  TempDir dir_;
  std::optional<proc::DemoProcess> demo_;
};

}  // namespace idem::testing

#endif  // IDEM_TESTS_HTTP_DEMO_PROCESS_SUITE_H_
