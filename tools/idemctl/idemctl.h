// idemctl, the operator's tool: inspects, revokes and purges the records of
// any idem store named by URI, and counts them where the store can
// (SEMANTICS.md, "The operator's tool"; docs/OPERATIONS.md has the usage).
//
//   idemctl --store URI inspect --scope S --key K [--method M --path P]
//                               [--json] [--body]
//   idemctl --store URI revoke  --scope S --key K [--method M --path P]
//   idemctl --store URI revoke  --record-id HEX
//   idemctl --store URI purge   [--limit N]
//   idemctl --store URI stats   [--json]
//
// The store is opened with OpenStore and no sweeper (a `sweep_interval_s`
// in the URI is dropped). `memory:` is refused: a memory store lives inside
// its application's process. An embedded store's file or directory must
// exist: idemctl never creates an empty store for a mistyped path.
//
// Thread-safety: Run may be called from one thread at a time (CLI11 and
// the output streams are not shared).

#ifndef IDEM_TOOLS_IDEMCTL_IDEMCTL_H_
#define IDEM_TOOLS_IDEMCTL_IDEMCTL_H_

#include <ostream>

namespace idem::idemctl {

// The process's exit status.
enum ExitCode : int {
  kOk = 0,          // Found, or done.
  kNotFound = 1,    // No such record (inspect: none live; revoke: none).
  kUsage = 2,       // Bad arguments, URI, hex id or key; memory: store.
  kStoreError = 3,  // Unreachable store, a damaged record, another error.
};

// Parses `argv` and runs the subcommand. Results go to `out`; every error
// is one line on `err`, "idemctl: ...", with any password of the store URI
// (or of any argument) replaced by "***". Returns the ExitCode.
int Run(int argc, const char* const* argv, std::ostream& out,
        std::ostream& err);

}  // namespace idem::idemctl

#endif  // IDEM_TOOLS_IDEMCTL_IDEMCTL_H_
