// BuiltPath: a program of this build tree or a script of the checkout, for
// the tests that run them as processes, from the path CMake gives them
// relative to the build tree's root (IDEM_DEMO_PATH, IDEMCTL_PATH,
// IDEM_GRPC_DEMO_PATH, IDEM_POSTGRES_SCRIPT, IDEM_REDIS_SCRIPT: for
// example "examples/demo/idem-demo" and "../../scripts/postgres.sh").
//
// Why relative: an absolute path in a compile definition is part of the
// compile command, so each checkout in another folder (a fresh clone in CI)
// compiled those files anew instead of taking them from ccache, which
// hashes the checkout's paths relative to it (CCACHE_BASEDIR): 14 files
// per configuration.
//
// Success: the absolute path, found from the running program's own
// (/proc/self/exe): the root is its nearest ancestor directory that holds
// CMakeCache.txt. Failure: a program outside a build tree aborts, saying
// so. Thread-safety: any thread; the returned string lives as long as the
// process (one per distinct argument).

#ifndef IDEM_TESTS_SUPPORT_BUILT_PATH_H_
#define IDEM_TESTS_SUPPORT_BUILT_PATH_H_

namespace idem::testing {

const char* BuiltPath(const char* from_build_root);

}  // namespace idem::testing

#endif  // IDEM_TESTS_SUPPORT_BUILT_PATH_H_
